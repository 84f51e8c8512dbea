"""The Placement section of ``benchmarks/RESULTS.md``, from one run's raw
results (:func:`benchmarks.placement.run`); standard library only.

``python -m benchmarks.placement --from-json RAW.json`` renders it again
without measuring.
"""

import collections

from benchmarks import placement_trees as trees

#: The bounds of project issue 27: every vGPU:N (N <= 8) query answers in
#: under 1 s on one host (shapes a and b) and under 5 s on ten (shape c).
BOUNDS = {'a': 1.0, 'b': 1.0, 'c': 5.0}
#: What the queries that are no longer sent did when they were, in the
#: run of 2026-12-02 15:15 UTC on 0a517ad (60 s bound, load 6.5-8.2; the
#: RESULTS.md of that commit): (table, shape, model, N, policy, settings)
#: -> result. "not run" there: a smaller N had timed out.
EARLIER = {
    ('main', 'a', 'per-parent', 4, 'default', 'defaults'):
        'timeout, 24.4 s CPU, 1312 MB',
    ('main', 'a', 'per-parent', 4, 'isolate', 'defaults'):
        'timeout, 26.6 s CPU, 1463 MB',
    ('main', 'a', 'per-GPU', 8, 'default', 'defaults'):
        'timeout, 32.7 s CPU',
    ('main', 'a', 'per-GPU', 8, 'isolate', 'defaults'):
        'timeout, 30.8 s CPU',
    ('main', 'a', 'per-GPU', 8, 'isolate', 'wide'):
        '1,000 in 31.6 s, 22.6 s CPU',
    ('main', 'b', 'per-GPU', 8, 'default', 'defaults'):
        'timeout, 35.0 s CPU',
    ('main', 'c', 'per-parent', 4, 'default', 'defaults'):
        'timeout, 33.0 s CPU, 1675 MB',
    ('main', 'c', 'per-parent', 4, 'isolate', 'defaults'):
        'timeout, 30.8 s CPU, 1510 MB',
    ('main', 'c', 'per-GPU', 8, 'default', 'defaults'):
        'timeout, 33.1 s CPU',
    ('main', 'c', 'per-GPU', 8, 'isolate', 'defaults'):
        'timeout, 35.2 s CPU',
    ('main', 'c', 'per-GPU', 8, 'isolate', 'wide'):
        'timeout, 40.0 s CPU',
    ('hash', 'a', 'per-parent', 4, 'default', 'defaults'):
        'timeout, 33.1 s CPU, 1955 MB',
    ('hash', 'a', 'per-parent', 4, 'isolate', 'defaults'):
        'timeout, 32.5 s CPU, 2301 MB',
    ('hash', 'a', 'per-GPU', 8, 'default', 'defaults'):
        'timeout, 30.7 s CPU, 2101 MB',
    ('hash', 'a', 'per-GPU', 8, 'isolate', 'defaults'):
        'timeout, 34.0 s CPU',
    ('hash', 'a', 'per-GPU', 8, 'isolate', 'wide'):
        '1,000 in 37.5 s, 20.1 s CPU',
    ('hash', 'c', 'per-parent', 4, 'default', 'defaults'):
        'timeout, 31.6 s CPU, 1822 MB',
    ('hash', 'c', 'per-parent', 4, 'isolate', 'defaults'):
        'timeout, 32.8 s CPU, 2194 MB',
    ('hash', 'c', 'per-GPU', 8, 'default', 'defaults'):
        'timeout, 25.3 s CPU, 1651 MB',
    ('hash', 'c', 'per-GPU', 8, 'isolate', 'defaults'):
        'timeout, 26.4 s CPU',
    ('hash', 'c', 'per-GPU', 8, 'isolate', 'wide'):
        'timeout, 23.9 s CPU',
}


def median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (
        values[mid - 1] + values[mid]) / 2.0


def summary(runs):
    """One case's runs as ``status``, ``wall``, ``cpu`` (medians over the
    answered runs, or the killed child's for a timeout), ``candidates``,
    ``hosts``, ``rss_kib`` (the largest child peak), ``runs``."""
    ok = [r for r in runs if r['status'] == 'ok']
    failed = [r for r in runs if r['status'] != 'ok']
    out = {'runs': len(runs),
           'rss_kib': max(r.get('rss_kib') or 0 for r in runs),
           'work': runs[0].get('work'), 'estimate': runs[0].get('estimate')}
    if runs[0]['status'] == 'not sent':
        out.update(status='not sent', runs=0)
        return out
    if failed:
        first = failed[0]
        out.update(status=first['status'], wall=first.get('wall'),
                   cpu=first.get('cpu', first.get('child_cpu')),
                   detail=first.get('detail'), after=first.get('after'))
        return out
    out.update(status='ok', wall=median([r['wall'] for r in ok]),
               cpu=median([r['cpu'] for r in ok]),
               candidates=ok[0]['candidates'], hosts=ok[0]['hosts'])
    return out


def brief(runs):
    s = summary(runs)
    if s['status'] == 'skipped':
        return 'not run: N=%d timed out' % s['after']
    if s['status'] == 'not sent':
        return 'not sent: %s' % fmt_work(s)
    if s['status'] != 'ok':
        return '%s after %.1f s (CPU %.1f s, %s)' % (
            s['status'], s['wall'] or 0, s['cpu'] or 0, fmt_mb(s['rss_kib']))
    return '%d candidates, wall %s, CPU %s, %s, %d run(s)' % (
        s['candidates'], fmt_ms(s['wall']), fmt_ms(s['cpu']),
        fmt_mb(s['rss_kib']), s['runs'])


def fmt_ms(seconds):
    if seconds is None:
        return '-'
    if seconds >= 10:
        return '{:,.0f}'.format(seconds * 1000)
    return '{:,.1f}'.format(seconds * 1000) if seconds < 0.1 else \
        '{:,.0f}'.format(seconds * 1000)


def fmt_count(value):
    """A count as digits up to 10**12, else as a power of ten."""
    if value < 10 ** 12:
        return '{:,}'.format(value)
    return '%.1e' % value


def fmt_work(s):
    """The work of a query not sent, and its estimate."""
    work = s['work']
    parts = ['%s products' % fmt_count(work['products'])]
    if work['partials']:
        parts.append('%s partial products' % fmt_count(work['partials']))
    if work['comparisons']:
        parts.append('≥ %s comparisons' % fmt_count(work['comparisons']))
    seconds = s['estimate']
    return '%s (est. %s s)' % (', '.join(parts), fmt_count(round(seconds))
                               if seconds < 10 ** 12 else '%.1e' % seconds)


def fmt_mb(kib):
    return '-' if not kib else '%.0f MB' % (kib * 1024 / 1e6)


def policy_label(policy, n, translation='groups'):
    groups = n if translation == 'groups' else 1
    sent = trees.sent_policy(policy, groups)
    flavor = 'unset' if policy == 'default' else policy
    return '%s → %s' % (flavor, sent or '(absent)')


def _cells(s, earlier=None):
    """candidates, wall, CPU, peak RSS, runs of one summary (``earlier``:
    what the query did in the run of :data:`EARLIER`)."""
    if s['status'] == 'not sent':
        text = '**not sent**: %s' % fmt_work(s)
        if earlier:
            text += '; 2026-12-02: %s' % earlier
        return [text, '-', '-', '-', '0']
    if s['status'] == 'ok':
        found = '{:,}'.format(s['candidates'])
        if s['hosts'] > 1:
            found += ' (%d hosts)' % s['hosts']
        return [found, fmt_ms(s['wall']), fmt_ms(s['cpu']),
                fmt_mb(s['rss_kib']), str(s['runs'])]
    if s['status'] == 'skipped':
        return ['not run (N=%d timed out)' % s['after'], '-', '-', '-', '0']
    what = {'timeout': '**timeout**', 'memory': '**memory cap**'}.get(
        s['status'], '**error** %s' % (s.get('detail') or '')[:80])
    return [what, '> %s' % fmt_ms(s['wall']) if s['status'] == 'timeout'
            else fmt_ms(s['wall']), fmt_ms(s['cpu']), fmt_mb(s['rss_kib']),
            str(s['runs'])]


def _index(results):
    """``{(table, shape, model, n, policy, settings): summary}``."""
    return {(c['table'], c['shape'], c['model'], c['n'], c['policy'],
             c['settings']): summary(c['runs'])
            for c in results.get('cases', ())}


def _ordered(results, table):
    return [c for c in results.get('cases', ()) if c['table'] == table]


def main_table(results, table='main'):
    index = _index(results)
    head = ['shape', 'hosts', 'model', 'N', 'group_policy (flavor → sent)',
            'settings', 'products', 'candidates', 'wall ms', 'CPU ms',
            'peak RSS', 'runs']
    lines = ['| %s |' % ' | '.join(head),
             '|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|']
    translation = 'one-group' if table == 'one-group' else 'groups'
    for c in _ordered(results, table):
        s = index[(table, c['shape'], c['model'], c['n'], c['policy'],
                   c['settings'])]
        shape = trees.SHAPES[c['shape']]
        model = c['model'] if shape.vfs else 'per-GPU (= per-parent)'
        key = (table, c['shape'], c['model'], c['n'], c['policy'],
               c['settings'])
        lines.append('| %s |' % ' | '.join(
            [c['shape'], str(shape.hosts), model, str(c['n']),
             policy_label(c['policy'], c['n'], translation), c['settings'],
             fmt_count(s['work']['products']) if s.get('work') else '-']
            + _cells(s, EARLIER.get(key))))
    return lines


def patched_table(results, table, columns):
    """The runs of ``table`` next to the same queries of the ``columns``
    tables (``[(table, title)]``, the stock one first)."""
    index = _index(results)
    head = ['shape', 'model', 'N', 'group_policy', 'settings']
    for _, title in columns:
        head += ['%s: candidates' % title, 'wall ms', 'CPU ms', 'peak RSS']
    lines = ['| %s |' % ' | '.join(head),
             '|---|---|---:|---|---|%s' % ('---:|' * 4 * len(columns))]
    for c in _ordered(results, table):
        key = (c['shape'], c['model'], c['n'], c['policy'], c['settings'])
        row = [c['shape'], c['model'], str(c['n']),
               policy_label(c['policy'], c['n']), c['settings']]
        for other, _ in columns:
            found = index.get((other,) + key)
            row += (_cells(found, EARLIER.get((other,) + key))[:4]
                    if found else ['-'] * 4)
        lines.append('| %s |' % ' | '.join(row))
    return lines


def verdicts(results):
    """``[(table, model, settings, policy, worst one-host wall, CPU,
    worst ten-host wall, CPU, met by wall, met by CPU)]``: whether every
    vGPU:N (N <= 8) of shapes a and b answers under 1 s and of shape c
    under 5 s. Shape b has one model; it counts for both."""
    by_combo = collections.OrderedDict()
    for c in results.get('cases', ()):
        if c['n'] > 8:
            continue
        shape = trees.SHAPES[c['shape']]
        models = trees.MODELS if not shape.vfs else (c['model'],)
        for model in models:
            by_combo.setdefault((c['table'], model, c['settings'],
                                 c['policy']), []).append(c)
    rows = []
    for (table, model, settings, policy), cases in by_combo.items():
        worst = {1: [0.0, 0.0], 10: [0.0, 0.0]}
        met_wall = met_cpu = True
        shapes = set()
        for c in cases:
            s = summary(c['runs'])
            shape = trees.SHAPES[c['shape']]
            shapes.add(c['shape'])
            bound = BOUNDS[c['shape']]
            if s['status'] != 'ok':
                met_wall = met_cpu = False
                # a query that did not answer outranks any time
                label = {'skipped': 'not run'}.get(s['status'], s['status'])
                if not isinstance(worst[shape.hosts][0], str):
                    worst[shape.hosts] = [label, label]
                continue
            if isinstance(worst[shape.hosts][0], str):
                continue
            pair = worst[shape.hosts]
            pair[0] = max(pair[0], s['wall'])
            pair[1] = max(pair[1], s['cpu'])
            met_wall &= s['wall'] < bound
            met_cpu &= s['cpu'] < bound
        complete = {'a', 'b', 'c'} <= shapes
        rows.append((table, model, settings, policy, worst[1], worst[10],
                     met_wall and complete, met_cpu and complete,
                     sorted(shapes)))
    return rows


def met(ok, shapes):
    if not {'a', 'b', 'c'} <= set(shapes):
        return 'n/a'
    return 'yes' if ok else 'no'


def verdict_table(results):
    head = ['table', 'model', 'settings', 'group_policy', 'shapes',
            'worst 1 host: wall / CPU ms', 'worst 10 hosts: wall / CPU ms',
            'all under the bounds (wall)', '(CPU)']
    lines = ['| %s |' % ' | '.join(head),
             '|---|---|---|---|---|---:|---:|---|---|']

    def pair(values):
        if isinstance(values[0], str):
            return values[0]
        return ' / '.join(fmt_ms(v) for v in values) if any(values) else '-'
    for table, model, settings, policy, one, ten, wall, cpu, shapes in \
            verdicts(results):
        lines.append('| %s |' % ' | '.join([
            table, model, settings, 'unset' if policy == 'default'
            else policy, ','.join(shapes), pair(one), pair(ten),
            met(wall, shapes), met(cpu, shapes)]))
    return lines


def _machine(results):
    m = results['machine']
    servers = results.get('servers') or {}
    rss = sorted({s['rss_kib'] for s in servers.values()
                  if s.get('rss_kib')})
    built = ['%s: %d providers, %.1f s' % (
        label.split(' ', 1)[1], s['build']['providers'],
        s['build']['seconds'])
        for label, s in servers.items() if s.get('build')]
    return [
        '| run | |', '|---|---|',
        '| commit measured | %s |' % m['commit'],
        '| date | %s |' % m['date'],
        '| machine | %s, %s cores, shared with other agents |' % (
            m['cpu'], m['cores']),
        '| load average (1/5/15 min) at start, end | %s; %s |' % (
            m['load'], m.get('load_end', '-')),
        '| Python, openstack-placement | %s, %s |' % (m['python'],
                                                      m['placement']),
        '| bound per query | %s s wall, %s MB address space |' % (
            '%g' % results['timeout'], results['memory_mb']),
        '| Placement server RSS before a query | %s |' % (
            ', '.join(fmt_mb(k) for k in rss) or '-'),
        '| trees built through the REST API | %s |' % (
            '; '.join(built) or '-'),
        '| whole run | %.0f s |' % results.get('seconds', 0), '']


def _nova_check(results):
    check = results.get('nova_check')
    if check is None:
        return ('not run (no Nova 34.0.0 virtualenv: '
                '`python -m benchmarks.run` creates benchmarks/.nova-venv)')
    if check['differ']:
        return '**differs** for %s' % ', '.join(check['differ'])
    return ('identical for all %d (mdev type, N, group_policy) cases'
            % len(check['checked']))


def _work_note(results):
    """How queries are chosen for sending, and how the estimate held."""
    costs = results.get('costs')
    if not costs:
        return []
    sent, under, over = 0, 0, []
    not_sent = same = 0
    for c in results.get('cases', ()):
        s = summary(c['runs'])
        if s['status'] == 'not sent':
            not_sent += 1
        if s['status'] != 'ok' or s.get('estimate') is None:
            continue
        sent += 1
        same += s['candidates'] == (s['work'] or {}).get('candidates')
        if s['wall'] <= s['estimate']:
            under += 1
        else:
            over.append('%s %s %s N=%d %s %s: %s ms, est. %s ms' % (
                c['table'], c['shape'], c['model'], c['n'], c['policy'],
                c['settings'], fmt_ms(s['wall']), fmt_ms(s['estimate'])))
    bound = results['timeout']
    return [
        'Work per query (`benchmarks/placement_work.py`, computed before '
        'the query is sent, from the tree, the query and the settings): '
        '**products**, the complete products of the request groups\' '
        'candidates that Placement 16 checks (depth-first with '
        'Placement\'s defaults: every product of every host, 8^8 for '
        'vGPU:8 on 8 GPUs; with `isolate` and without patch 0002 the '
        'wide-tree generator still yields every product capacity allows and '
        'checks `isolate` on complete products), the partial products the '
        'wide-tree generator checks, and the comparisons in Placement\'s '
        'candidate set that its `AllocationRequest.__hash__` causes (at '
        'least k(k-1)/2 for k kept products on the same providers; 0 with '
        'patch 0001). The functional test `test_placement_work` checks '
        'products and partial products against the calls a profiled '
        'Placement makes (equal) and the comparisons (at least as many '
        'made). Estimate = %s s + %s us per product + %s us per partial '
        'product + %s us per comparison, about three times the highest CPU '
        'cost per unit of the 2026-12-02 run; a query whose estimate is above '
        'half its bound (%g s) is **not sent** (%d of the %d queries here): '
        'its row gives its work and estimate and, if it was sent in the run '
        'of 2026-12-02 (0a517ad, same bound, load 6.5-8.2), what it did '
        'then. Of the %d queries sent, %d returned the number of candidates '
        'the computation gives and %d answered within their estimate%s.' % (
            '%g' % costs['base'], '%g' % (costs['products'] * 1e6),
            '%g' % (costs['partials'] * 1e6),
            '%g' % (costs['comparisons'] * 1e6), bound / 2, not_sent,
            len(results.get('cases', ())), sent, same, under,
            '' if not over else '; above it: ' + '; '.join(over)), '']


def section(results):
    settings = results['settings']['wide']
    sample = trees.query_string(trees.SHAPES['a'], 2, 'default')
    lines = ['## Placement: `GET /allocation_candidates` for `vGPU:N`', '']
    if results.get('quick'):
        lines += ['Quick run (`--quick`): a smoke test, not the reference '
                  'figures.', '']
    lines += [
        'Generated by `python -m benchmarks.placement` (issue 27, '
        'deliverable 4); `benchmarks/placement.py` says how. The real '
        'openstack-placement of this virtualenv, in process, SQLite, '
        'noauth2; each query in a child process forked from the server '
        'after the trees are built, killed at the bound; wall, CPU '
        '(`process_time` of the child around the request) and peak RSS '
        '(`ru_maxrss` of that child, from `wait4` of its pid) are the '
        'child\'s own. Medians over the runs (5 below 1 s of wall, 3 below '
        '10 s, else 1); for a timeout, the CPU the child had used when it '
        'was killed.', '']
    lines += _machine(results)
    lines += [
        'Trees (`benchmarks/placement_trees.py`): a compute node root '
        '(VCPU 64, MEMORY_MB 515072, DISK_GB 1800, trait OWNER_NOVA) per '
        'host; children `<node>_<PCI address>` with `CUSTOM_MDEV_NVIDIA_'
        '<TYPE>` and traits `CUSTOM_MDEV_TYPE_NVIDIA_<TYPE>`, '
        '`COMPUTE_MANAGED_PCI_DEVICE`, `OWNER_NOVA`. Shape a: 8 A100-like '
        'GPUs (nvidia-699) x 16 VF parents x 1 mdev; per-parent = 128 '
        'providers of 1 (`<node>_<VF>`), per-GPU = 8 of 16 (`<node>_<PF>`). '
        'Shape b: 4 T4-like GPUs (nvidia-222) x 16 mdevs, 4 providers of '
        '16 in both models. Shape c: 10 hosts of shape a.', '',
        'Query: what Nova 34.0.0 with the series sends for a flavor of 1 '
        'VCPU, 512 MB, 1 GB and `pci_passthrough:alias=vGPU:N` with '
        '`[filter_scheduler]pci_in_placement` (microversion 1.36), e.g. '
        'vGPU:2, group_policy unset:', '', '    ' + sample, '',
        'Checked against the query string Nova 34.0.0 itself builds '
        '(`benchmarks/placement_nova.py`: flavor -> InstancePCIRequest -> '
        'RequestSpec -> request filters -> resources_from_request_spec -> '
        'to_querystring): %s.' % _nova_check(results), '',
        'Settings: `defaults` = Placement 16\'s defaults; `wide` = %s.' % (
            ', '.join('`%s = %s`' % (k, v) for k, v in settings.items())),
        ''] + _work_note(results) + [
        '### vGPU:N as N request groups (what Nova sends)', '']
    lines += main_table(results) + ['']
    if _ordered(results, 'one-group'):
        lines += ['### Alternative translation: one request group of N '
                  'units', '',
                  'The same trees asked for `resources<id>-0=CUSTOM_MDEV_'
                  '...:N` (one group, so Nova sends no group_policy): every '
                  'vGPU of the server from one provider.', '']
        lines += main_table(results, 'one-group') + ['']
    patches = results.get('patches') or []
    if _ordered(results, 'hash'):
        lines += ['### Placement with `AllocationRequest.__hash__` fixed',
                  '', 'The same queries on a copy of the installed '
                  '`placement` package with `%s` applied (first on the '
                  'server\'s PYTHONPATH).' % patches[0], '']
        lines += patched_table(results, 'hash', [
            ('main', 'stock'), ('hash', '0001')]) + ['']
    if _ordered(results, 'isolate'):
        lines += ['### Placement pruning `group_policy=isolate` in the '
                  'wide-tree generation', '',
                  'The `isolate` queries with the `wide` settings (the only '
                  'ones whose code path `%s` changes) on a copy with it and '
                  '`%s` applied.' % (patches[1], patches[0]), '']
        lines += patched_table(results, 'isolate', [
            ('main', 'stock'), ('hash', '0001'),
            ('isolate', '0001+0002')]) + ['']
    lines += ['### Which combinations meet the bounds', '',
              'Every vGPU:N (N <= 8) on shapes a and b under %g s, on '
              'shape c under %g s (issue 27); a timeout, an error, a query '
              'not sent or not run fails the row; n/a: not every shape was '
              'run. Shape b counts for both models. The settings the admin '
              'guide recommends (patch 0012) are `wide` with the flavor\'s '
              'group_policy unset.' % (BOUNDS['a'], BOUNDS['c']),
              '']
    lines += verdict_table(results) + ['']
    return '\n'.join(lines)
