"""Run the benchmarks of nova-pci-mdev side by side with upstream Nova.

    python -m benchmarks.run            # full: N = 100 .. 10,000, both sides,
                                        # writes benchmarks/RESULTS.md
    python -m benchmarks.run --quick    # N <= 1,000, ours only, < 1 minute
    python -m benchmarks.run --quick --sides ours,nova

Each side runs in a child process of its own interpreter: ours in this
one (:mod:`benchmarks.ours`), Nova 34.0.0 in its own virtualenv
(:mod:`benchmarks.nova_side`, default ``benchmarks/.nova-venv``, created
with ``pip install nova==34.0.0 "SQLAlchemy<2.1"`` when missing). The
sides run one after the other, never at the same time. The same synthetic
hosts (:mod:`benchmarks.hostgen`) feed both.
"""

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile

from benchmarks import hostgen
from benchmarks import ours
from benchmarks import timing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOVA_VENV = os.path.join(ROOT, 'benchmarks', '.nova-venv')
NOVA_REQUIREMENTS = ('nova==34.0.0', 'SQLAlchemy<2.1')
RESULTS = os.path.join(ROOT, 'benchmarks', 'RESULTS.md')

FULL_SIZES = (100, 1000, 3000, 10000)
QUICK_SIZES = (100, 1000)
OURS_RUNS = {100: 7, 1000: 7, 3000: 5, 10000: 5}
NOVA_RUNS = {100: 5, 1000: 5, 3000: 3, 10000: 2}
QUICK_RUNS = 3
DISCOVERY_RUNS = 5

WORKLOADS = (
    ('first_sync', 'First sync (empty tracker, N device records)'),
    ('resync_nochange', 'Resync, no change'),
    ('resync_removed', 'Resync, one free VF removed'),
) + tuple(
    ('query_' + policy, 'Scheduler query, vGPU:1, policy %s' % policy)
    for policy in ours.POLICIES
) + (
    ('claim', 'Claim vGPU:1 (per instance)'),
    ('free', 'Free (per instance)'),
)

#: (workload, minimal Nova / ours ratio at 10,000 devices)
RATIO_TARGETS = (('resync_nochange', 200), ('first_sync', 20)) + tuple(
    ('query_' + policy, 20) for policy in ours.POLICIES) + (
    ('claim', 10), ('free', 10))
MAX_EXPONENT = 1.1
MAX_DISCOVERY_SECONDS = 1.0
DISCOVERY_TARGET_N = 10000
MAX_RSS_MB = 200


# -- helpers ----------------------------------------------------------------

def log(message):
    print(message, file=sys.stderr, flush=True)


def fmt_time(seconds):
    if seconds is None:
        return '-'
    if seconds < 1e-3:
        return '%.1f µs' % (seconds * 1e6)
    if seconds < 1:
        return '%.2f ms' % (seconds * 1e3)
    return '%.2f s' % seconds


def fmt_ratio(ratio):
    return ('%.1fx' if ratio < 10 else '%.0fx') % ratio


def exponent(times, low, high):
    """Growth exponent k of t ~ N^k between sizes ``low`` and ``high``."""
    if not times.get(low) or not times.get(high):
        return None
    return math.log(times[high] / times[low]) / math.log(high / low)


def fmt_exponent(value):
    return '-' if value is None else '%.2f' % value


def run_child(argv, what):
    log('running %s: %s' % (what, ' '.join(argv)))
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit('%s failed (exit %d)' % (what, done.returncode))
    return done.stdout


def machine(nova_python=None):
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
    return info


# -- Nova's virtualenv ------------------------------------------------------

def ensure_nova_venv(path):
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


# -- the two sides ----------------------------------------------------------

def run_ours(workdir, sizes, runs, discovery_sizes, discovery_runs):
    plan = {'sizes': list(sizes), 'runs': {str(n): runs[n] for n in sizes},
            'discovery_sizes': list(discovery_sizes),
            'discovery_runs': discovery_runs}
    plan_path = os.path.join(workdir, 'ours-plan.json')
    out_path = os.path.join(workdir, 'ours-results.json')
    with open(plan_path, 'w') as f:
        json.dump(plan, f)
    run_child([sys.executable, '-m', 'benchmarks.ours', '--input',
               plan_path, '--output', out_path], 'nova-pci-mdev side')
    with open(out_path) as f:
        return json.load(f)


def run_rss(n, unit):
    out = run_child([sys.executable, '-m', 'benchmarks.ours', '--rss',
                     str(n), '--unit', unit], 'peak RSS (%d %s)' % (n, unit))
    return json.loads(out.strip().splitlines()[-1])


def run_nova(workdir, python, sizes, runs):
    plan = dict(hostgen.NOVA_PCI_OPTIONS, alias_name=hostgen.ALIAS_NAME,
                numa_nodes=hostgen.NUMA_NODES,
                instance_cells=list(ours.INSTANCE_CELLS),
                policies=list(ours.POLICIES), claims=ours.CLAIMS, sizes=[])
    for n in sizes:
        host = hostgen.generate(n)
        plan['sizes'].append({
            'devices': hostgen.nova_devices(host),
            'remove': ours.removed_address(hostgen.records(host)),
            'runs': runs[n]})
    plan_path = os.path.join(workdir, 'nova-plan.json')
    out_path = os.path.join(workdir, 'nova-results.json')
    with open(plan_path, 'w') as f:
        json.dump(plan, f)
    run_child([python, '-m', 'benchmarks.nova_side', '--input', plan_path,
               '--output', out_path], 'Nova 34.0.0 side')
    with open(out_path) as f:
        return json.load(f)


# -- report -----------------------------------------------------------------

def medians(tracker_results):
    """{workload: {N: median seconds}} and {N: number of samples}."""
    out, counts = {}, {}
    for n, workloads in (tracker_results or {}).items():
        for name, samples in workloads.items():
            out.setdefault(name, {})[int(n)] = timing.median(samples)
            counts[int(n)] = len(samples)
    return out, counts


def growth_span(sizes):
    sizes = sorted(sizes)
    if 1000 in sizes and 10000 in sizes:
        return 1000, 10000
    return (sizes[0], sizes[-1]) if len(sizes) > 1 else (None, None)


def render(info, sizes, ours_res, nova_res, rss, quick):
    mine, my_runs = medians(ours_res['tracker'])
    theirs, their_runs = medians(nova_res['tracker'] if nova_res else None)
    low, high = growth_span(sizes)
    lines = ['# Benchmarks: nova-pci-mdev vs upstream Nova 34.0.0', '']
    if quick:
        lines += ['Quick run (N <= 1,000): a smoke test, not the reference '
                  'figures.', '']
    lines += [
        'Generated by `python -m benchmarks.run%s` (tox env `bench`); '
        'how the workloads are built and what is timed: '
        '[README.md](README.md).' % (' --quick' if quick else ''), '',
        '| machine | |', '|---|---|',
        '| date | %s |' % info['date'],
        '| CPU | %s |' % info['cpu'],
        '| cores | %s |' % info['cores'],
        '| Python | %s (ours)%s |' % (
            info['python'], ', %s (Nova venv)' % nova_res['python']
            if nova_res else ''),
        '| libvirt | %s (test driver, in process) |' % info['libvirt'],
        '| Nova | %s |' % (nova_res['nova_version'] if nova_res
                           else 'not run'),
        '| load average (1/5/15 min) at start, end | %s; %s |' % (
            info['load'], info['load_end']),
        '', 'Times are medians of the %s time; runs per size: ours %s%s.'
        % (CLOCKS[timing.CLOCK_NAME], _runs(my_runs),
           '; Nova %s' % _runs(their_runs) if their_runs else ''),
        'Ratio = Nova time / our time. Exponent k: t ~ N^k from %s to %s '
        'devices.' % (_n(low), _n(high)), '']
    for name, title in WORKLOADS:
        lines += ['## %s' % title, '',
                  '| N | nova-pci-mdev | Nova 34.0.0 | ratio |',
                  '|---:|---:|---:|---:|']
        for n in sizes:
            a = mine.get(name, {}).get(n)
            b = theirs.get(name, {}).get(n)
            ratio = fmt_ratio(b / a) if a and b else '-'
            lines.append('| %s | %s | %s | %s |' % (
                _n(n), fmt_time(a), fmt_time(b), ratio))
        lines.append('| exponent %s→%s | %s | %s | |' % (
            _n(low), _n(high),
            fmt_exponent(exponent(mine.get(name, {}), low, high)),
            fmt_exponent(exponent(theirs.get(name, {}), low, high))))
        lines.append('')

    disc = {int(n): timing.median(s['discovery'])
            for n, s in ours_res['discovery'].items()}
    opened = {int(n): timing.median(s['libvirt_open'])
              for n, s in ours_res['discovery'].items()}
    dsizes = sorted(disc)
    dlow, dhigh = growth_span(dsizes)
    lines += ['## Discovery from the real libvirt test driver (ours only)',
              '',
              '`Host(conn).discover(settings)`: listAllDevices, XMLDesc of '
              'every node device, parsing, device records. `libvirt.open` '
              '(the test driver reading the host file) is timed apart.', '',
              '| node devices | records | discover | libvirt.open |',
              '|---:|---:|---:|---:|']
    for n in dsizes:
        lines.append('| %s | %s | %s | %s |' % (
            _n(n), _n(ours_res['discovery_records'][str(n)]),
            fmt_time(disc[n]), fmt_time(opened[n])))
    lines += ['| exponent %s→%s | | %s | %s |' % (
        _n(dlow), _n(dhigh), fmt_exponent(exponent(disc, dlow, dhigh)),
        fmt_exponent(exponent(opened, dlow, dhigh))), '']

    if rss:
        lines += ['## Peak memory (ours only)', '',
                  'One fresh process: libvirt test driver host, discovery, '
                  'first sync, resync, the four queries, %d claims and frees.'
                  ' RSS = `ru_maxrss`.' % ours.CLAIMS, '',
                  '| host | records | RSS after imports | peak RSS |',
                  '|---|---:|---:|---:|']
        for label, item in rss:
            lines.append('| %s | %s | %.1f MB | %.1f MB |' % (
                label, _n(item['records']), item['baseline_kib'] / 1000.0,
                item['peak_kib'] / 1000.0))
        lines.append('')

    if not quick:
        lines += targets(mine, theirs, disc, rss, low, high)
    return '\n'.join(lines) + '\n'


CLOCKS = {'cpu': 'process CPU', 'wall': 'wall-clock'}


def _runs(counts):
    return ', '.join('%s: %d' % (_n(n), counts[n]) for n in sorted(counts))


def _n(n):
    return '-' if n is None else '{:,}'.format(n)


def targets(mine, theirs, disc, rss, low, high):
    rows = []
    at = 10000
    for name, minimum in RATIO_TARGETS:
        a = mine.get(name, {}).get(at)
        b = theirs.get(name, {}).get(at)
        ratio = b / a if a and b else None
        rows.append(('%s >= %dx faster than Nova at 10,000' % (
            name, minimum), '-' if ratio is None else fmt_ratio(ratio),
            ratio is not None and ratio >= minimum))
    for name, _title in WORKLOADS:
        k = exponent(mine.get(name, {}), low, high)
        rows.append(('%s: exponent <= %.1f' % (name, MAX_EXPONENT),
                     fmt_exponent(k), k is not None and k <= MAX_EXPONENT))
    k = exponent(disc, *growth_span(sorted(disc)))
    rows.append(('discovery: exponent <= %.1f' % MAX_EXPONENT,
                 fmt_exponent(k), k is not None and k <= MAX_EXPONENT))
    seconds = disc.get(DISCOVERY_TARGET_N)
    rows.append(('discovery of 10,000 node devices < 1 s',
                 fmt_time(seconds),
                 seconds is not None and seconds < MAX_DISCOVERY_SECONDS))
    for label, item in rss or ():
        mb = item['peak_kib'] / 1000.0
        rows.append(('peak RSS < %d MB (%s)' % (MAX_RSS_MB, label),
                     '%.1f MB' % mb, mb < MAX_RSS_MB))
    met = sum(1 for row in rows if row[2])
    lines = ['## Targets', '', '%d of %d met.' % (met, len(rows)), '',
             '| target | measured | met |', '|---|---:|---|']
    lines += ['| %s | %s | %s |' % (what, value, 'yes' if ok else '**no**')
              for what, value, ok in rows]
    return lines + ['']


# -- main -------------------------------------------------------------------

def main(argv=None):
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
    parser.add_argument('--nova-venv', default=NOVA_VENV)
    parser.add_argument('--output', default=None,
                        help='Markdown report (default: %s for a full run, '
                        'none for --quick); "-" for stdout only'
                        % os.path.relpath(RESULTS, ROOT))
    parser.add_argument('--json', default=None,
                        help='also write the raw samples here')
    args = parser.parse_args(argv)

    sides = set((args.sides or ('ours' if args.quick else 'ours,nova'))
                .split(','))
    if not sides <= {'ours', 'nova'} or 'ours' not in sides:
        parser.error('--sides must be ours or ours,nova, got %r' % args.sides)
    sizes = (tuple(int(s) for s in args.sizes.split(',')) if args.sizes
             else QUICK_SIZES if args.quick else FULL_SIZES)
    runs_ours = {n: QUICK_RUNS if args.quick else OURS_RUNS.get(n, 5)
                 for n in sizes}
    runs_nova = {n: QUICK_RUNS if args.quick else NOVA_RUNS.get(n, 1)
                 for n in sizes}
    output = args.output or (None if args.quick else RESULTS)

    nova_python = None
    if 'nova' in sides:
        nova_python = ensure_nova_venv(args.nova_venv)
    info = machine()
    with tempfile.TemporaryDirectory(prefix='bench-') as workdir:
        ours_res = run_ours(workdir, sizes, runs_ours, sizes,
                            QUICK_RUNS if args.quick else DISCOVERY_RUNS)
        rss = []
        largest = max(sizes)
        rss.append(('%s device records' % _n(largest),
                    run_rss(largest, 'records')))
        if not args.quick:
            rss.append(('%s node devices' % _n(largest),
                        run_rss(largest, 'nodes')))
        nova_res = None
        if nova_python:
            nova_res = run_nova(workdir, nova_python, sizes, runs_nova)
    info['load_end'] = '%.2f %.2f %.2f' % os.getloadavg()
    report = render(info, sizes, ours_res, nova_res, rss, args.quick)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'ours': ours_res, 'nova': nova_res,
                       'rss': rss}, f, indent=1)
    print(report)
    if output and output != '-':
        with open(output, 'w') as f:
            f.write(report)
        log('wrote %s' % output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
