"""``RESULTS.md`` and ``README.md`` of the benchmarks, from one run.

Both files are written by the same invocation of :mod:`benchmarks.run`
from the same raw results, so that neither can say something the other
does not (the README's summary of targets met and missed is computed, not
typed). ``python -m benchmarks.report RAW.json`` renders them again from
the ``--json`` output of a run (to change the wording without measuring
again).
"""

import math
import sys

from benchmarks import cli
from benchmarks import ours
from benchmarks import timing

TARGET_N = 10000
CLI_MAX_CPU = 1.5
#: On a slower machine: at most this many times the CPU of importing
#: oslo.versionedobjects in the same run (issue 30).
CLI_MAX_OVO_RATIO = 2.6
CLI_MAX_RSS_MB = 150
MAX_EXPONENT = 1.1
STARTUP_MAX_RATIO = 1.3
HELP_MAX_SECONDS = 0.3
DISCOVERY_MAX_SECONDS = 1.0
#: (workload, floor workload, largest ours / floor at 10,000, counted in
#: instructions: benchmarks.instructions). The first sync's floor target
#: was withdrawn by issue 30.
FLOOR_TARGETS = (('resync_nochange', 'floor_resync', 5),)
#: (workload, smallest Nova / ours at 10,000 in CPU time, side by side):
#: issue 30's.
RATIO_TARGETS = (('first_sync', 50), ('resync_nochange', 500),
                 ('resync_removed', 500)) + tuple(
    ('query_' + p, 500) for p in ours.POLICIES) + (
    ('claim', 200), ('free', 200))

WORKLOADS = (
    ('first_sync', 'First sync (empty tracker, N device records)',
     'first_sync'),
    ('resync_nochange', 'Resync, no change', 'resync'),
    ('resync_removed', 'Resync, one free VF removed', None),
) + tuple(
    ('query_' + policy, 'Scheduler query, vGPU:1, policy %s' % policy,
     'query') for policy in ours.POLICIES
) + (
    ('claim', 'Claim vGPU:1 (per instance)', None),
    ('free', 'Free (per instance)', None),
)
POOL_ROWS = ('query_', 'claim')


# -- numbers -----------------------------------------------------------------

def by_n(mapping):
    """JSON turns int keys into strings; give them back."""
    return {(int(k) if str(k).isdigit() else k): v
            for k, v in (mapping or {}).items()}


def fmt_time(seconds):
    if seconds is None:
        return '-'
    if seconds < 0:
        return '-' + fmt_time(-seconds)
    if seconds < 0.99995e-3:
        return '%.1f µs' % (seconds * 1e6)
    if seconds < 0.999995:
        return '%.2f ms' % (seconds * 1e3)
    return '%.2f s' % seconds


def fmt_ratio(ratio):
    if ratio is None:
        return '-'
    return ('%.2fx' if ratio < 2 else '%.1fx' if ratio < 10
            else '%.0fx') % ratio


def fmt_mb(kib):
    return '-' if kib is None else '%.1f MB' % (kib * 1024 / 1e6)


def fmt_n(n):
    return '-' if n is None else '{:,}'.format(n)


def fmt_exponent(value):
    return '-' if value is None else '%.2f' % value


def spread(values):
    """(max - min) / median, as a percentage string."""
    values = [v for v in values if v is not None]
    middle = timing.median(values)
    if not values or not middle:
        return '-'
    return '%.0f%%' % (100.0 * (max(values) - min(values)) / middle)


def exponent(times, low, high):
    """Growth exponent k of t ~ N^k between sizes ``low`` and ``high``."""
    a, b = times.get(low), times.get(high)
    if not a or not b or a <= 0 or b <= 0 or low == high:
        return None
    return math.log(b / a) / math.log(high / low)


def ratio(a, b):
    return b / a if a and b else None


def growth_span(sizes):
    sizes = sorted(n for n in sizes if isinstance(n, int))
    if 1000 in sizes and 10000 in sizes:
        return 1000, 10000
    return (sizes[0], sizes[-1]) if len(sizes) > 1 else (None, None)


def load_range(replies):
    loads = [x for r in replies for x in (r.get('load') or [])]
    if not loads:
        return '-'
    return '%.1f-%.1f' % (min(loads), max(loads))


class Tracker:
    """Medians and spreads of the tracker results of every side."""

    def __init__(self, results):
        tracker = results.get('tracker') or {}
        self.sides = {side: by_n(tracker.get(side))
                      for side in ('ours', 'nova', 'floor')}

    def samples(self, side, name, n):
        """Every sample of ``name`` at ``n`` (a reply holds one, or a list:
        the first syncs, timing.FIRST_SYNCS a run)."""
        found = []
        for reply in self.sides[side].get(n, ()):
            value = reply['samples'].get(name)
            if isinstance(value, list):
                found.extend(value)
            elif value is not None:
                found.append(value)
        return found

    def median(self, side, name, n):
        return timing.median(self.samples(side, name, n))

    def medians(self, side, name):
        return {n: self.median(side, name, n) for n in self.sides[side]}

    def pools(self, side, n):
        replies = self.sides[side].get(n) or [{}]
        return replies[0].get('pools')

    def replies(self, n):
        return [r for side in self.sides.values() for r in side.get(n, ())]


class Instructions:
    """The instruction counts of :mod:`benchmarks.instructions`:
    ``results['instructions'] = {'ours': {N: {phase: count}}, 'baseline':
    {'commit': ..., N: {...}}}``."""

    def __init__(self, results):
        data = results.get('instructions') or {}
        self.sides = {side: by_n({k: v for k, v in (data.get(side) or {})
                                  .items() if k != 'commit'})
                      for side in ('ours', 'baseline')}
        self.baseline_commit = (data.get('baseline') or {}).get('commit')

    def value(self, side, phase, n):
        return (self.sides[side].get(n) or {}).get(phase)

    def exponent(self, side, phase):
        low, high = growth_span(self.sides[side])
        return exponent({n: self.value(side, phase, n) for n in (low, high)},
                        low, high)


class Cli:
    """Medians of the CLI samples: ``value(host, command, 'cpu')``."""

    def __init__(self, results):
        data = results.get('cli') or {}
        self.hosts = by_n(data.get('hosts'))
        self.startup = data.get('startup') or {}
        self.sizes = sorted(k for k in self.hosts if isinstance(k, int))

    def samples(self, host, command):
        return self.hosts.get(host, {}).get(command, [])

    def value(self, host, command, key):
        return timing.median([s[key] for s in self.samples(host, command)])

    def startup_value(self, what, key):
        return timing.median([s[key] for s in self.startup.get(what, ())])

    def base_label(self):
        """The host whose CPU is start-up: the generated base host when
        the run has one (``cli.base_host``), else the sample host."""
        return 'base' if 'base' in self.hosts else 'sample'

    def _by_round(self, host, command):
        rounds = {}
        for index, sample in enumerate(self.samples(host, command)):
            rounds.setdefault(sample.get('round', index), []).append(
                sample['cpu'])
        return {k: timing.median(v) for k, v in rounds.items()}

    def net(self, host, command):
        """Median over the rounds of the CPU of ``command`` on ``host``
        less its CPU on the base host in the same round (the rounds
        interleave the hosts, so a pair sees the same load; a host that
        ran a command several times a round gives the median of those)."""
        at, base = (self._by_round(host, command),
                    self._by_round(self.base_label(), command))
        return timing.median([at[k] - base[k] for k in at if k in base])

    def net_exponent(self, command):
        """Exponent of the CPU above what the same command costs on the
        base host (interpreter, imports, libvirt and store set-up)."""
        low, high = growth_span(self.sizes)
        if low is None:
            return None
        return exponent({n: self.net(n, command) for n in (low, high)},
                        low, high)

    def exponent(self, command):
        low, high = growth_span(self.sizes)
        return exponent({n: self.value(n, command, 'cpu')
                         for n in self.sizes}, low, high)


# -- RESULTS.md --------------------------------------------------------------

def _machine(results):
    info = results['machine']
    about = results.get('nova_about') or {}
    runs = by_n(results.get('runs'))
    return [
        '| machine | |', '|---|---|',
        '| date | %s |' % info['date'],
        '| CPU | %s |' % info['cpu'],
        '| cores | %s |' % info['cores'],
        '| Python | %s (ours)%s |' % (
            info['python'],
            ', %s (Nova venv)' % about['python'] if about else ''),
        '| libvirt | %s (test driver, in process) |' % info['libvirt'],
        '| Nova | %s |' % (about.get('nova_version') or 'not run'),
        '| load average (1/5/15 min) at start, end | %s; %s |' % (
            info['load'], info.get('load_end', '-')),
        '| commit measured | %s%s |' % (
            (info.get('commit') or 'unknown')[:10],
            ' with uncommitted changes' if info.get('dirty') else ''),
        '', 'Times are medians of the %s time. Runs per size, the same for '
        'every side, interleaved run by run (ours, Nova, floor, ours, ...): '
        '%s. Spread = (slowest - fastest) / median over those runs; load = '
        'the 1-minute load average seen during the runs of that size (both '
        'sides). The first sync is sampled %d times a run on our side and '
        'the floor\'s (a fresh tracker and fresh input each), once on '
        'Nova\'s. Ratio = Nova / ours; ours/floor = ours / the floor. '
        'Exponent k: t ~ N^k.' % (
            {'cpu': 'process CPU', 'wall': 'wall-clock'}[timing.CLOCK_NAME],
            ', '.join('%s: %d' % (fmt_n(n), runs[n]) for n in sorted(runs)),
            timing.FIRST_SYNCS),
        '']


def _workload_table(tracker, name, title, floor_name, sizes):
    with_pools = name.startswith(POOL_ROWS)
    head = ['N', 'nova-pci-mdev', 'spread', 'Nova 34.0.0', 'spread',
            'ratio']
    if floor_name:
        head += ['floor', 'ours/floor']
    if with_pools:
        head += ['pools (ours / Nova)']
    head += ['load']
    lines = ['## %s' % title, '', '| %s |' % ' | '.join(head),
             '|%s|' % '|'.join('---:' for _ in head)]
    for n in sizes:
        a = tracker.median('ours', name, n)
        b = tracker.median('nova', name, n)
        row = [fmt_n(n), fmt_time(a), spread(tracker.samples('ours', name, n)),
               fmt_time(b), spread(tracker.samples('nova', name, n)),
               fmt_ratio(ratio(a, b))]
        if floor_name:
            f = tracker.median('floor', floor_name, n)
            row += [fmt_time(f), fmt_ratio(ratio(f, a))]
        if with_pools:
            row.append('%s / %s' % (fmt_n(tracker.pools('ours', n)),
                                    fmt_n(tracker.pools('nova', n))))
        row.append(load_range(tracker.replies(n)))
        lines.append('| %s |' % ' | '.join(row))
    low, high = growth_span(sizes)
    tail = ['exponent %s→%s' % (fmt_n(low), fmt_n(high)),
            fmt_exponent(exponent(tracker.medians('ours', name), low, high)),
            '', fmt_exponent(exponent(tracker.medians('nova', name), low,
                                      high)), '', '']
    tail += [''] * (len(head) - len(tail))
    lines += ['| %s |' % ' | '.join(tail), '']
    return lines


def _same_objects(results):
    """Ours on the host whose every GPU slot is an existing mdev (one
    record for each of Nova's objects) against Nova's 10,000 row."""
    tracker = Tracker(results)
    same = tracker.sides['ours'].get('same')
    at = TARGET_N
    if not same:
        return []
    records = same[0].get('records')
    fewer = (tracker.sides['ours'].get(at) or [{}])[0].get('records')
    lines = ['## The same objects on both sides (%s)' % fmt_n(at), '',
             'Our "%s devices" above are %s records: a GPU\'s slots still to '
             'create are counted on the GPU (`extra_info.creatable`), while '
             'Nova holds an object for every slot. Here every GPU slot is an '
             'existing mdev, so that ours holds %s records, one for each of '
             'the %s objects Nova holds; Nova\'s device list of this host is '
             'the one of its %s row (it lists every slot whether its mdev '
             'exists or not: checked by the runner), so its column is that '
             'row\'s. Ours: %d run%s.' % (
                 fmt_n(at), fmt_n(fewer), fmt_n(records), fmt_n(at),
                 fmt_n(at), len(same), '' if len(same) == 1 else 's'), '',
             '| workload | ours, %s records | ours, %s records | Nova 34.0.0, '
             '%s objects | ratio, same objects |' % (
                 fmt_n(fewer), fmt_n(records), fmt_n(at)),
             '|---|---:|---:|---:|---:|']
    for name, _title, _floor in WORKLOADS:
        a = tracker.median('ours', name, at)
        b = tracker.median('ours', name, 'same')
        nova = tracker.median('nova', name, at)
        lines.append('| %s | %s | %s | %s | %s |' % (
            name, fmt_time(a), fmt_time(b), fmt_time(nova),
            fmt_ratio(ratio(b, nova))))
    return lines + [''] + _same_first_sync(tracker, records)


def _same_first_sync(tracker, records):
    """Whether the first sync's Nova target holds on the same objects
    too (issue 30 asks for the row; the target is judged on the 10,000
    row of the first table)."""
    at = TARGET_N
    minimum = dict(RATIO_TARGETS).get('first_sync')
    ours = tracker.median('ours', 'first_sync', 'same')
    nova = tracker.median('nova', 'first_sync', at)
    same, row = ratio(ours, nova), ratio(
        tracker.median('ours', 'first_sync', at), nova)
    if same is None or not minimum or not records:
        return []
    return ['First sync on the same objects: %s faster than Nova, so the '
            'target of at least %dx at %s, judged on the first table\'s '
            '%s row (%s), is %s on the same objects: %s a record on ours '
            '(%s records), %s an object on Nova\'s (%s objects).' % (
                fmt_ratio(same), minimum, fmt_n(at), fmt_n(at),
                fmt_ratio(row), 'met' if same >= minimum else '**not met**',
                fmt_time(ours / records), fmt_n(records),
                fmt_time(nova / at), fmt_n(at)), '']


def _discovery(results):
    data = results.get('discovery') or {}
    mine, floor = by_n(data.get('ours')), by_n(data.get('floor'))
    if not mine:
        return []

    def values(replies, key):
        return [r['samples'][key] for r in replies]

    lines = ['## Discovery from the real libvirt test driver (ours only)', '',
             '`Host(conn).discover(settings)`: listAllDevices, XMLDesc of '
             'every node device, parsing, device records. Floor: '
             'listAllDevices plus `name()` and `XMLDesc(0)` of every node '
             'device, nothing parsed. `libvirt.open` (the test driver reading '
             'the host file) is timed apart.', '',
             '| node devices | records | discover | spread | floor | '
             'ours/floor | libvirt.open | load |',
             '|---:|---:|---:|---:|---:|---:|---:|---:|']
    medians = {}
    for n in sorted(mine):
        medians[n] = timing.median(values(mine[n], 'discovery'))
        f = timing.median(values(floor.get(n, ()), 'discovery'))
        lines.append('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
            fmt_n(n), fmt_n(mine[n][0]['records']), fmt_time(medians[n]),
            spread(values(mine[n], 'discovery')), fmt_time(f),
            fmt_ratio(ratio(f, medians[n])),
            fmt_time(timing.median(values(mine[n], 'libvirt_open'))),
            load_range(mine[n] + floor.get(n, []))))
    low, high = growth_span(sorted(medians))
    lines += ['| exponent %s→%s | | %s | | | | | |' % (
        fmt_n(low), fmt_n(high), fmt_exponent(exponent(medians, low, high))),
        '']
    return lines


def _cli(results):
    data = Cli(results)
    if not data.hosts:
        return []
    labels = ['first run'] + [label for label, _, _ in cli.COMMANDS]
    lines = ['## The CLI process (`nova-pci-mdev`, as an operator runs it)',
             '', 'One process per sample (%s). CPU = user + system time of '
             'the process, peak RSS = its `ru_maxrss`, wall = start to exit. '
             '`first run`: `devices` on an empty state directory; every other '
             'row runs on a state directory that earlier runs filled. '
             '`claim` asks for `pci_passthrough:alias=vGPU:1` and `release` '
             'frees that instance again, so each round starts from the same '
             'state.' % ', '.join(
                 '%s: %d' % (h, len(data.samples(h, 'devices')))
                 for h in ['sample'] + (['base'] if 'base' in data.hosts
                                        else []) + data.sizes), '']
    hosts = ['sample'] + (['base'] if 'base' in data.hosts else [])
    for host in hosts + data.sizes:
        title = ('the bundled sample host' if host == 'sample' else
                 'the start-up base, a generated host of %d node devices'
                 % cli.BASE_NODES if host == 'base' else
                 'a generated host of %s node devices' % fmt_n(host))
        lines += ['### On %s' % title, '',
                  '| command | CPU | spread | wall | peak RSS | load |',
                  '|---|---:|---:|---:|---:|---:|']
        for label in labels:
            samples = data.samples(host, label)
            if not samples:
                continue
            lines.append('| %s | %s | %s | %s | %s | %s |' % (
                label, fmt_time(data.value(host, label, 'cpu')),
                spread([s['cpu'] for s in samples]),
                fmt_time(data.value(host, label, 'wall')),
                fmt_mb(data.value(host, label, 'rss_kib')),
                load_range([{'load': [s['load']]} for s in samples])))
        lines.append('')
    low, high = growth_span(data.sizes)
    base = ('the start-up base host (%d node devices) in the same round, '
            'median over the rounds' % cli.BASE_NODES
            if data.base_label() == 'base' else 'the sample host')
    lines += ['### Growth', '', 'CPU from %s to %s node devices; "above '
              'start-up" subtracts what the same command costs on %s.' % (
                  fmt_n(low), fmt_n(high), base), '',
              '| command | CPU at %s | CPU at %s | exponent | above start-up '
              'at %s | at %s | exponent above start-up |' % (
                  fmt_n(low), fmt_n(high), fmt_n(low), fmt_n(high)),
              '|---|---:|---:|---:|---:|---:|---:|']
    for label in labels:
        lines.append('| %s | %s | %s | %s | %s | %s | %s |' % (
            label, fmt_time(data.value(low, label, 'cpu')),
            fmt_time(data.value(high, label, 'cpu')),
            fmt_exponent(data.exponent(label)),
            fmt_time(data.net(low, label)), fmt_time(data.net(high, label)),
            fmt_exponent(data.net_exponent(label))))
    lines.append('')
    if data.startup:
        lines += ['### Start-up (interleaved)', '',
                  '| process | CPU | spread | wall | peak RSS | load |',
                  '|---|---:|---:|---:|---:|---:|']
        for key, label in (
                ('ovo_import', '`python -c "%s"`' % cli.OVO_IMPORT),
                ('help', '`nova-pci-mdev --help`'),
                ('devices', '`nova-pci-mdev devices` (sample host)')):
            samples = data.startup.get(key, ())
            lines.append('| %s | %s | %s | %s | %s | %s |' % (
                label, fmt_time(data.startup_value(key, 'cpu')),
                spread([s['cpu'] for s in samples]),
                fmt_time(data.startup_value(key, 'wall')),
                fmt_mb(data.startup_value(key, 'rss_kib')),
                load_range([{'load': [s['load']]} for s in samples])))
        lines.append('')
    return lines


def targets(results):
    """[(what, measured, met)] of every target (full runs only)."""
    tracker = Tracker(results)
    data = Cli(results)
    rows = []
    at = TARGET_N
    for name, minimum in RATIO_TARGETS:
        r = ratio(tracker.median('ours', name, at),
                  tracker.median('nova', name, at))
        rows.append(('%s >= %dx faster than Nova at 10,000' % (name, minimum),
                     fmt_ratio(r), r is not None and r >= minimum))
    counts = Instructions(results)
    for name, floor_name, maximum in FLOOR_TARGETS:
        r = ratio(counts.value('ours', floor_name, at),
                  counts.value('ours', name, at))
        rows.append(('%s within %dx of its floor at 10,000 (instructions)'
                     % (name, maximum), fmt_ratio(r),
                     r is not None and r <= maximum))
    for name, _title, _floor in WORKLOADS:
        k = counts.exponent('ours', name)
        rows.append(('%s: exponent <= %.1f (instructions)'
                     % (name, MAX_EXPONENT), fmt_exponent(k),
                     k is not None and k <= MAX_EXPONENT))
    disc = {n: timing.median([r['samples']['discovery'] for r in replies])
            for n, replies in by_n((results.get('discovery') or {})
                                   .get('ours')).items()}
    k = exponent(disc, *growth_span(disc))
    rows.append(('discovery: exponent <= %.1f' % MAX_EXPONENT,
                 fmt_exponent(k), k is not None and k <= MAX_EXPONENT))
    seconds = disc.get(at)
    rows.append(('discovery of 10,000 node devices < %.0f s'
                 % DISCOVERY_MAX_SECONDS, fmt_time(seconds),
                 seconds is not None and seconds < DISCOVERY_MAX_SECONDS))
    rows += _cli_targets(data, at)
    return rows


def _cli_targets(data, at):
    rows = []
    if not data.hosts:
        return rows
    ovo = data.startup_value('ovo_import', 'cpu')
    for label, _command, _check in cli.COMMANDS:
        cpu = data.value(at, label, 'cpu')
        r = ratio(ovo, cpu)
        rows.append(('CLI %s at 10,000 node devices: CPU < %.1f s or within '
                     '%.1fx of importing oslo_versionedobjects.base'
                     % (label, CLI_MAX_CPU, CLI_MAX_OVO_RATIO),
                     '%s (%s)' % (fmt_time(cpu), fmt_ratio(r)),
                     cpu is not None and (cpu < CLI_MAX_CPU or (
                         r is not None and r <= CLI_MAX_OVO_RATIO))))
        kib = data.value(at, label, 'rss_kib')
        rows.append(('CLI %s at 10,000 node devices: peak RSS < %d MB'
                     % (label, CLI_MAX_RSS_MB), fmt_mb(kib),
                     kib is not None and kib * 1024 / 1e6 < CLI_MAX_RSS_MB))
    for key in ('cpu', 'wall'):
        r = ratio(data.startup_value('ovo_import', key),
                  data.startup_value('devices', key))
        rows.append(('sample host `devices` within %.1fx of importing '
                     'oslo_versionedobjects.base (%s)' % (
                         STARTUP_MAX_RATIO, key), fmt_ratio(r),
                     r is not None and r <= STARTUP_MAX_RATIO))
    for key in ('cpu', 'wall'):
        seconds = data.startup_value('help', key)
        rows.append(('`--help` under %.1f s (%s)' % (HELP_MAX_SECONDS, key),
                     fmt_time(seconds),
                     seconds is not None and seconds < HELP_MAX_SECONDS))
    return rows


def _instructions(results):
    counts = Instructions(results)
    if not counts.sides['ours']:
        return []
    low, high = growth_span(counts.sides['ours'])
    base = counts.baseline_commit
    lines = ['## Instructions (callgrind)', '',
             'What each tracker workload executes, counted by valgrind\'s '
             'callgrind (`benchmarks/instructions.py`: one process per size '
             'under `valgrind --tool=callgrind`, `PYTHONHASHSEED=0`, every '
             'code path run once before counting, every workload once, the '
             'counters dumped between two workloads; parsing the input is '
             'not counted; claim and free per instance, of %d). A count '
             'does not move with the load of the machine: the growth '
             'exponents and the ours/floor ratios of the targets are these.'
             % ours.CLAIMS]
    if base:
        lines[-1] += (' The same counts of `%s` (the code before issue 30\'s '
                      'redesign: ovo internals replaced, template makers) '
                      'in the same run, on the same records.' % base[:10])
    head = ['workload', 'at %s' % fmt_n(low), 'at %s' % fmt_n(high),
            'per record at %s' % fmt_n(high), 'exponent']
    if base:
        head += ['%s at %s' % (base[:7], fmt_n(high)), 'change']
    lines += ['', '| %s |' % ' | '.join(head),
              '|---|%s|' % '|'.join('---:' for _ in head[1:])]
    records = counts.value('ours', 'records', high)
    names = [w[0] for w in WORKLOADS] + ['floor_first_sync', 'floor_resync']
    for name in names:
        a = counts.value('ours', name, low)
        b = counts.value('ours', name, high)
        row = [name, fmt_count(a), fmt_count(b),
               fmt_count(b / records) if b and records else '-',
               fmt_exponent(counts.exponent('ours', name))]
        if base:
            old = counts.value('baseline', name, high)
            row += [fmt_count(old), '%+.0f%%' % (100.0 * (b - old) / old)
                    if b and old else '-']
        lines.append('| %s |' % ' | '.join(row))
    lines.append('')
    for name, floor_name in (('first_sync', 'floor_first_sync'),
                             ('resync_nochange', 'floor_resync')):
        r = ratio(counts.value('ours', floor_name, high),
                  counts.value('ours', name, high))
        lines.append('%s / its floor at %s: %s in instructions.' % (
            name, fmt_n(high), fmt_ratio(r)))
    lines.append('')
    return lines


def fmt_count(value):
    if value is None:
        return '-'
    for unit, size in (('G', 1e9), ('M', 1e6), ('K', 1e3)):
        if value >= size:
            fmt = '%.1f%s' if value < 100 * size else '%.0f%s'
            return fmt % (value / size, unit)
    return '%.0f' % value


def _targets_section(results):
    rows = targets(results)
    met = sum(1 for row in rows if row[2])
    lines = ['## Targets', '', '%d of %d met.' % (met, len(rows)), '',
             '| target | measured | met |', '|---|---:|---|']
    lines += ['| %s | %s | %s |' % (what, value, 'yes' if ok else '**no**')
              for what, value, ok in rows]
    from benchmarks import commentary
    return lines + [''] + commentary.section(results, rows)


def results_md(results):
    tracker = Tracker(results)
    sizes = sorted(by_n(results.get('runs')))
    lines = ['# Benchmarks: nova-pci-mdev vs upstream Nova 34.0.0', '']
    if results.get('quick'):
        lines += ['Quick run (N <= 1,000): a smoke test, not the reference '
                  'figures.', '']
    lines += ['Generated by `python -m benchmarks.run%s` (tox env `bench`), '
              'like [README.md](README.md), which says how the workloads '
              'are built and what is timed.' % (
                  ' --quick' if results.get('quick') else ''), '']
    lines += _machine(results)
    for name, title, floor_name in WORKLOADS:
        lines += _workload_table(tracker, name, title, floor_name, sizes)
    lines += _same_objects(results)
    lines += _instructions(results)
    lines += _discovery(results)
    lines += _cli(results)
    if not results.get('quick'):
        lines += _targets_section(results)
    return '\n'.join(lines) + '\n'


# -- README.md ---------------------------------------------------------------

def readme_md(results):
    from benchmarks import readme
    rows = targets(results)
    missed = [row for row in rows if not row[2]]
    return readme.render(results, rows, missed)


def main(argv=None):
    import json
    import os

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit('usage: python -m benchmarks.report RAW.json')
    with open(argv[0]) as f:
        results = json.load(f)
    from benchmarks import sections
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, 'RESULTS.md')
    text = sections.keep(results_md(results), sections.read(path))
    with open(path, 'w') as f:
        f.write(text)
    if not results.get('quick'):
        with open(os.path.join(here, 'README.md'), 'w') as f:
            f.write(readme_md(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
