"""Run the benchmarks of nova-pci-mdev side by side with upstream Nova.

    python -m benchmarks.run            # full: writes benchmarks/RESULTS.md
                                        # and benchmarks/README.md
    python -m benchmarks.run --quick    # N <= 1,000, ours only, a smoke test
    python -m benchmarks.run --quick --sides ours,nova

Three worker processes answer one request per line
(:func:`benchmarks.timing.serve`): ours in this interpreter
(:mod:`benchmarks.ours`), Nova 34.0.0 in its own virtualenv
(:mod:`benchmarks.nova_side`, default ``benchmarks/.nova-venv``, created
with ``pip install nova==34.0.0 "SQLAlchemy<2.1"`` when missing) and the
floors (:mod:`benchmarks.floors`, standard library only). Per size the
runner interleaves them run by run (ours, Nova, floor, ours, Nova, floor,
...), so that both sides see the same machine load; one run is one sample
of every workload. Then the real CLI process is measured
(:mod:`benchmarks.cli`). One invocation writes both Markdown files
(:mod:`benchmarks.report`).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

from benchmarks import cli
from benchmarks import hostgen
from benchmarks import instructions
from benchmarks import ours
from benchmarks import report
from benchmarks import sections
from benchmarks import worker as worker_mod

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOVA_VENV = os.path.join(ROOT, 'benchmarks', '.nova-venv')
NOVA_REQUIREMENTS = ('nova==34.0.0', 'SQLAlchemy<2.1')
RESULTS = os.path.join(ROOT, 'benchmarks', 'RESULTS.md')
README = os.path.join(ROOT, 'benchmarks', 'README.md')

FULL_SIZES = (100, 1000, 3000, 10000)
QUICK_SIZES = (100, 1000)
#: Runs per size, the same for every side. One at 10,000: a run of Nova's
#: there is about 200 s of CPU, half an hour on the loaded machine of the
#: 2026-12-06 run (load 11-16 on 2 cores); the ratios against Nova there
#: are hundreds to thousands, far from their targets' noise.
RUNS = {100: 3, 1000: 3, 3000: 2, 10000: 1}
QUICK_RUNS = 3
DISCOVERY_RUNS = 5
CLI_SIZES = (1000, 3000, 10000)
QUICK_CLI_SIZES = (100, 1000)
CLI_RUNS = 3
STARTUP_RUNS = 7
#: The size of the same-objects row, and its key in the tracker results.
SAME_N = 10000
SAME = 'same'
#: The code the instruction counts are compared with: the last commit
#: before issue 30's redesign (objects on ovo internals).
BASELINE = 'fcd5485'


def log(message):
    print(message, file=sys.stderr, flush=True)


def Worker(argv, what):
    """A benchmark child process (:class:`benchmarks.worker.Worker`),
    logged as it starts."""
    log('starting %s: %s' % (what, ' '.join(argv)))
    return worker_mod.Worker(argv, what)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    info = {'cpu': cpu, 'cores': os.cpu_count(),
            'python': platform.python_version(),
            'date': datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%d %H:%M UTC'),
            'load': '%.2f %.2f %.2f' % os.getloadavg()}
    try:
        import libvirt
        version = libvirt.getVersion()
        info['libvirt'] = '%d.%d.%d' % (version // 1000000,
                                        version // 1000 % 1000,
                                        version % 1000)
    except Exception as exc:   # reported, not fatal
        info['libvirt'] = 'unavailable (%s)' % exc
    info['commit'] = _git('rev-parse', 'HEAD')
    # Uncommitted changes to what is measured make the commit a lie.
    info['dirty'] = bool(_git('status', '--porcelain', '--',
                              'nova_pci_mdev', 'benchmarks', 'setup.cfg'))
    return info


def _git(*args):
    done = subprocess.run(['git', '-C', ROOT] + list(args),
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_nova_venv(path):
    """The Python of a virtualenv with Nova 34.0.0, created if needed."""
    python = os.path.join(path, 'bin', 'python')
    probe = [python, '-c', 'import nova.pci.manager, nova.version; '
             'print(nova.version.version_string())']
    if os.path.exists(python):
        done = subprocess.run(probe, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == '34.0.0':
            return python
    log('creating %s with %s (a few minutes)' % (
        path, ' '.join(NOVA_REQUIREMENTS)))
    subprocess.run([sys.executable, '-m', 'venv', path], check=True)
    subprocess.run([python, '-m', 'pip', 'install', '-q',
                    '--disable-pip-version-check'] +
                   list(NOVA_REQUIREMENTS), check=True)
    subprocess.run(probe, check=True, capture_output=True)
    return python


def write_inputs(workdir, sizes, discovery_sizes):
    """Per size: the records (ours, floors), Nova's devices, the host."""
    inputs = {}
    for n in sizes:
        host = hostgen.generate(n)
        records = hostgen.records(host)
        item = {'records': os.path.join(workdir, 'records-%d.json' % n),
                'devices': os.path.join(workdir, 'nova-%d.json' % n),
                'remove': ours.removed_address(records)}
        with open(item['records'], 'w') as f:
            json.dump(records, f)
        with open(item['devices'], 'w') as f:
            json.dump(hostgen.nova_devices(host), f)
        inputs[n] = item
    if SAME_N in sizes:
        # Every GPU slot an existing mdev: one record of ours for every
        # object of Nova's, whose device list is that of SAME_N itself
        # (Nova lists every slot, existing or not).
        host = hostgen.generate(SAME_N, existing=hostgen.SLOTS_PER_GPU)
        records = hostgen.records(host)
        if hostgen.nova_devices(host) != hostgen.nova_devices(
                hostgen.generate(SAME_N)):
            raise SystemExit('benchmark: the same-objects host is not '
                             'the same device list on Nova\'s side')
        item = {'records': os.path.join(workdir, 'records-same.json'),
                'remove': ours.removed_address(records)}
        with open(item['records'], 'w') as f:
            json.dump(records, f)
        inputs[SAME] = item
    hosts = {}
    for n in discovery_sizes:
        hosts[n] = os.path.join(workdir, 'host-nodes-%d.xml' % n)
        with open(hosts[n], 'w') as f:
            f.write(hostgen.host_xml(hostgen.generate(n, unit='nodes')))
    return inputs, hosts


def nova_plan(workdir):
    plan = dict(hostgen.NOVA_PCI_OPTIONS, alias_name=hostgen.ALIAS_NAME,
                numa_nodes=hostgen.NUMA_NODES,
                instance_cells=list(ours.INSTANCE_CELLS),
                policies=list(ours.POLICIES), claims=ours.CLAIMS)
    path = os.path.join(workdir, 'nova-plan.json')
    with open(path, 'w') as f:
        json.dump(plan, f)
    return path


def run_tracker(workers, inputs, runs):
    """``{side: {N: [reply, ...]}}``, the sides interleaved run by run;
    the same-objects host (key :data:`SAME`) on our side only."""
    results = {side: {} for side in workers}
    for n, item in inputs.items():
        if n == SAME:
            for index in range(runs[SAME_N]):
                results['ours'].setdefault(SAME, []).append(
                    workers['ours'].ask('tracker', n=SAME,
                                        records=item['records']))
            log('tracker: the same-objects host done')
            continue
        for index in range(runs[n]):
            for side, worker in workers.items():
                if side == 'nova':
                    reply = worker.ask('tracker', devices=item['devices'],
                                       remove=item['remove'])
                else:
                    reply = worker.ask('tracker', n=n,
                                       records=item['records'])
                results[side].setdefault(n, []).append(reply)
            log('tracker: %d devices, run %d of %d done' % (
                n, index + 1, runs[n]))
    return results


def run_discovery(mine, floor, hosts, runs):
    results = {'ours': {}, 'floor': {}}
    for n, path in hosts.items():
        for _ in range(runs):
            results['ours'].setdefault(n, []).append(
                mine.ask('discovery', n=n, host=path))
            results['floor'].setdefault(n, []).append(
                floor.ask('discovery', host=path))
        log('discovery: %d node devices done' % n)
    return results


def run_instructions(inputs, sizes, baseline, workdir):
    """``{'ours': {N: counts}, 'baseline': {'commit': ..., N: counts}}``
    (benchmarks.instructions) at the two sizes of the growth span."""
    span = [n for n in report.growth_span(sizes) if n in inputs]
    out = {'ours': {}}
    tree = None
    if baseline:
        tree = instructions.baseline_tree(baseline, workdir)
        out['baseline'] = {'commit': subprocess.run(
            ['git', '-C', ROOT, 'rev-parse', baseline], check=True,
            capture_output=True, text=True).stdout.strip()}
    for n in span:
        out['ours'][n] = instructions.count(inputs[n]['records'])
        log('instructions: %d devices (ours) done' % n)
        if tree:
            out['baseline'][n] = instructions.count(inputs[n]['records'],
                                                    tree)
            log('instructions: %d devices (%s) done' % (n, baseline))
    return out


class _Background:
    """``func(*args)`` in a thread (it waits on child processes);
    :meth:`result` joins it and returns or raises what it did."""

    def __init__(self, func, *args):
        import threading
        self._out = {}

        def target():
            try:
                self._out['value'] = func(*args)
            except BaseException as exc:    # re-raised by result()
                self._out['error'] = exc

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        if 'error' in self._out:
            raise self._out['error']
        return self._out['value']


def run_cli(workdir, sizes, runs, startup_runs):
    hosts = {'sample': cli.sample_host(workdir),
             'base': cli.base_host(workdir)}
    for n in sizes:
        hosts[n] = cli.generated_host(workdir, n)
    # The start-up base and the generated hosts (whose differences make
    # the growth exponents) run every command several times a round; the
    # base and the low end of the growth span, whose difference is small,
    # more often.
    repeats = {key: cli.REPEATS for key in hosts if key != 'sample'}
    low = report.growth_span(sizes)[0]
    for key in ('base', low):
        if key in repeats:
            repeats[key] = cli.SMALL_REPEATS
    return {'hosts': cli.run_hosts(hosts, runs, log, repeats),
            'startup': cli.run_startup(workdir, startup_runs)}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true',
                        help='N = 100 and 1,000 only, %d runs (CI smoke)'
                        % QUICK_RUNS)
    parser.add_argument('--sides', default=None,
                        help='ours, nova or ours,nova (default: both; '
                        'ours with --quick)')
    parser.add_argument('--sizes', default=None,
                        help='comma-separated device counts')
    parser.add_argument('--no-cli', action='store_true',
                        help='skip the CLI process rows')
    parser.add_argument('--nova-venv', default=NOVA_VENV)
    parser.add_argument('--baseline', default=None,
                        help='a commit whose instruction counts are given '
                        'beside ours (default: %s for a full run)'
                        % BASELINE)
    parser.add_argument('--no-instructions', action='store_true',
                        help='skip the callgrind counts')
    parser.add_argument('--output', default=None,
                        help='Markdown results (default: %s and %s for a '
                        'full run, none for --quick); "-" for stdout only'
                        % (os.path.relpath(RESULTS, ROOT),
                           os.path.relpath(README, ROOT)))
    parser.add_argument('--json', default=None,
                        help='also write the raw samples here')
    args = parser.parse_args(argv)
    args.sides = set((args.sides or ('ours' if args.quick else 'ours,nova'))
                     .split(','))
    if not args.sides <= {'ours', 'nova'} or 'ours' not in args.sides:
        parser.error('--sides must be ours or ours,nova')
    args.sizes = (tuple(int(s) for s in args.sizes.split(','))
                  if args.sizes else
                  QUICK_SIZES if args.quick else FULL_SIZES)
    return args


def main(argv=None):
    args = parse_args(argv)
    sizes = args.sizes
    runs = {n: QUICK_RUNS if args.quick else RUNS.get(n, 3) for n in sizes}
    cli_sizes = () if args.no_cli else (
        QUICK_CLI_SIZES if args.quick else CLI_SIZES)
    cli_runs = QUICK_RUNS if args.quick else CLI_RUNS
    nova_python = (ensure_nova_venv(args.nova_venv)
                   if 'nova' in args.sides else None)
    results = {'machine': machine(), 'quick': args.quick,
               'sizes': list(sizes), 'runs': runs,
               'sides': sorted(args.sides)}
    with tempfile.TemporaryDirectory(prefix='bench-') as workdir:
        inputs, hosts = write_inputs(workdir, sizes, sizes)
        workers = {'ours': Worker([sys.executable, '-m', 'benchmarks.ours',
                                   '--serve'], 'nova-pci-mdev side')}
        if nova_python:
            workers['nova'] = Worker(
                [nova_python, '-m', 'benchmarks.nova_side', '--plan',
                 nova_plan(workdir), '--serve'], 'Nova 34.0.0 side')
            results['nova_about'] = workers['nova'].ask('about')
        workers['floor'] = Worker([sys.executable, '-m', 'benchmarks.floors',
                                   '--serve'], 'floors')
        # Instruction counts do not depend on the machine's load: they
        # run beside the timed workloads instead of after them.
        counting = None
        if not args.no_instructions and instructions.available():
            counting = _Background(run_instructions, inputs, sizes,
                                   args.baseline or (
                                       None if args.quick else BASELINE),
                                   workdir)
        results['tracker'] = run_tracker(workers, inputs, runs)
        results['discovery'] = run_discovery(
            workers['ours'], workers['floor'], hosts,
            QUICK_RUNS if args.quick else DISCOVERY_RUNS)
        for worker in workers.values():
            worker.close()
        if counting is not None:
            results['instructions'] = counting.result()
        if cli_sizes:
            results['cli'] = run_cli(workdir, cli_sizes, cli_runs,
                                     QUICK_RUNS if args.quick
                                     else STARTUP_RUNS)
    results['machine']['load_end'] = '%.2f %.2f %.2f' % os.getloadavg()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return write_reports(results, args.output, args.quick)


def write_reports(results, output, quick):
    text = report.results_md(results)
    print(text)
    if output == '-' or (output is None and quick):
        return 0
    # The sections other benchmarks own (the Placement one) stay.
    text = sections.keep(text, sections.read(output or RESULTS))
    with open(output or RESULTS, 'w') as f:
        f.write(text)
    log('wrote %s' % (output or RESULTS))
    if output is None:
        with open(README, 'w') as f:
            f.write(report.readme_md(results))
        log('wrote %s' % README)
    return 0


if __name__ == '__main__':
    sys.exit(main())
