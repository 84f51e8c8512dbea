"""``tools/realhost``: build (or reuse) the VM image, boot it for each phase
of the scenario, collect the checks, print them and end with
``N passed, M failed``.

Exit codes: 0 every check passed; 1 a check failed; 3 a build or boot step
failed (the message names the step; the summary line counts it as one
failed check, so that CI never reads an empty run as green).
"""

import argparse
import datetime
import fcntl
import json
import os
import shutil
import sys
import time

from nova_pci_mdev.tests.realhost import image
from nova_pci_mdev.tests.realhost import report
from nova_pci_mdev.tests.realhost import steps
from nova_pci_mdev.tests.realhost import vm

#: The scenario's boots, in order (see guest.py): the second boot is the
#: VM reboot the persistent mdevs must survive.
PHASES = ('scenario', 'reboot')
#: ``--short`` (CI): one boot, devices to release, no exhaustion, no reboot.
SHORT_PHASES = ('short',)
#: ``--series``: the patched Nova on the first boot, then after a reboot.
SERIES_PHASES = ('series', 'series-reboot')
KEEP_RUNS = 5


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='tools/realhost', description=__doc__.split('\n\n')[0])
    parser.add_argument('--cache', default=image.default_cache(),
                        help='cache directory (default %(default)s)')
    parser.add_argument('--accel', choices=('auto', 'tcg', 'kvm'),
                        default='auto', help='QEMU accelerator; auto uses '
                        'KVM only when a probe boot with it works')
    parser.add_argument('--phase-timeout', type=int, default=2700,
                        help='seconds one boot may take (default '
                        '%(default)s)')
    parser.add_argument('--short', action='store_true',
                        help='one boot: devices, check-config, claim, a '
                        'domain, in-use removals, release (for CI)')
    parser.add_argument('--series', action='store_true',
                        help='run the Nova patch series (patches/ on Nova '
                        '34.0.0, with Placement) in the VM instead of the '
                        'CLI scenario: two boots')
    parser.add_argument('--break-prepare', action='store_true',
                        help='with --series: take the creation of claimed '
                        'mdevs out of the patched driver (the run must '
                        'fail)')
    parser.add_argument('--build-only', action='store_true',
                        help='build or refresh the image, boot nothing')
    parser.add_argument('--exec', dest='exec_script', metavar='SCRIPT',
                        help='boot once running SCRIPT (sh) in the VM '
                        'instead of the scenario; its output is printed')
    parser.add_argument('--report', metavar='PATH',
                        help='also write the Markdown report (for '
                        'docs/REALHOST.md)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the run\'s disk overlay')
    args = parser.parse_args(argv)
    if args.break_prepare:
        args.series = True
    if args.series and args.short:
        parser.error('--series and --short are two different runs')
    return args


def _repo():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))


def _new_run_dir(cache):
    runs = os.path.join(cache, 'runs')
    os.makedirs(runs, exist_ok=True)
    for old in sorted(os.listdir(runs))[:-KEEP_RUNS]:
        image.safe_rmtree(os.path.join(runs, old))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y%m%dT%H%M%SZ')
    path = os.path.join(runs, stamp)
    os.makedirs(os.path.join(path, 'results'))
    return path


def _boot_phases(log, img, run_dir, accel, phases, timeout):
    results = os.path.join(run_dir, 'results')
    overlay = os.path.join(run_dir, 'overlay.qcow2')
    vm.make_overlay(log, img.disk, overlay)
    timings = {}
    for phase in phases:
        boot = vm.Boot(log, img, overlay, results, accel, phase, run_dir)
        rc, elapsed = boot.wait(timeout)
        timings[phase] = elapsed
        log.note('phase %s: guest exit code %d after %.0f s'
                 % (phase, rc, elapsed))
    return results, overlay, timings


def _exec(log, img, run_dir, accel, script, timeout):
    shutil.copy(script, os.path.join(run_dir, 'results', 'exec.sh'))
    results, _, _ = _boot_phases(log, img, run_dir, accel, ('exec',),
                                 timeout)
    with open(os.path.join(results, 'phase-exec.log'),
              errors='replace') as handle:
        sys.stdout.write(handle.read())
    return 0


def _lock(cache):
    """Hold ``<cache>/lock`` for the whole run (two runs would build into
    the same directories); None when another run holds it."""
    os.makedirs(cache, exist_ok=True)
    handle = open(os.path.join(cache, 'lock'), 'a+')
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or 'unknown'
        handle.close()
        return None, holder
    handle.truncate(0)
    handle.write('pid %d\n' % os.getpid())
    handle.flush()
    return handle, None


def _refuse(reason):
    print('tools/realhost: %s' % reason, file=sys.stderr)
    print(report.summary_line(0, 1))
    return 3


def _build_and_boot(args, log, run_dir, facts, started):
    """Build, choose the accelerator, boot; return the results directory
    and phases, or an exit code when there is nothing to report."""
    img = image.build(log, _repo(), args.cache, series=args.series,
                      break_prepare=args.break_prepare)
    facts['build_s'] = round(time.monotonic() - started)
    facts['rebuilt'] = img.rebuilt
    facts['kernel_package'] = '%s (%s)' % (img.release, img.version)
    log.note('image ready after %d s (rebuilt: %s)' % (
        facts['build_s'], ', '.join(img.rebuilt) or 'nothing'))
    if args.build_only:
        print(report.summary_line(0, 0))
        return 0
    accel, why = vm.choose_accel(log, args.accel, img.kernel, run_dir,
                                 args.cache)
    facts['accel'] = '%s (%s)' % (accel, why)
    log.note('accelerator: %s' % facts['accel'])
    if args.exec_script:
        return _exec(log, img, run_dir, accel, args.exec_script,
                     args.phase_timeout)
    phases = (SERIES_PHASES if args.series else
              SHORT_PHASES if args.short else PHASES)
    results, overlay, timings = _boot_phases(
        log, img, run_dir, accel, phases, args.phase_timeout)
    facts['boots_s'] = {k: round(v) for k, v in timings.items()}
    if not args.keep:
        os.unlink(overlay)
    return results, phases


def _finish(args, run_dir, facts, results, phases):
    checks = report.load_checks(results, phases)
    facts.update(report.load_facts(results, phases))
    with open(os.path.join(run_dir, 'report.json'), 'w') as handle:
        json.dump({'facts': facts, 'checks': checks}, handle, indent=1)
    if args.report:
        report.write_report(args.report, facts, checks)
    sys.stdout.write(report.table(checks))
    passed, failed = report.counts(checks)
    print('total %d s (build %d s, boots %s)' % (
        facts['total_s'], facts['build_s'], ', '.join(
            '%s %d s' % kv for kv in facts['boots_s'].items())))
    print(report.summary_line(passed, failed))
    return 0 if failed == 0 and passed else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        return _refuse('needs root (apt-get, debootstrap, chroot)')
    lock, holder = _lock(args.cache)
    if lock is None:
        return _refuse('another run (%s) holds %s; wait for it to end'
                       % (holder, os.path.join(args.cache, 'lock')))
    started = time.monotonic()
    run_dir = _new_run_dir(args.cache)
    log = steps.Log(os.path.join(run_dir, 'realhost.log'))
    log.note('run directory %s' % run_dir)
    facts = {'started': datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec='seconds')}
    try:
        outcome = _build_and_boot(args, log, run_dir, facts, started)
    except steps.StepFailed as exc:
        return _refuse('%s\n(log in %s)' % (exc, log.path))
    if isinstance(outcome, int):
        return outcome
    facts['total_s'] = round(time.monotonic() - started)
    return _finish(args, run_dir, facts, *outcome)


if __name__ == '__main__':
    sys.exit(main())
