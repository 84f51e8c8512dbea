"""The commentary of RESULTS.md, from the run: what issue 30's redesign
cost or saved (:func:`redesign`, instruction counts against the baseline
commit), and why a target was missed.

:func:`explain` gives, for one missed target of :func:`report.targets`,
what the run measured around it. The prose names what was measured; every
number comes from the run being reported (CPU times, instruction counts),
none is typed in. A target that is met gets no commentary.
"""

from benchmarks import report

AT = report.TARGET_N


def _per_record(tracker, side, name, n=AT):
    """(median seconds, records, µs per record) of a tracker workload
    (the record count is the one our side reports: same input)."""
    replies = tracker.sides['ours'].get(n) or []
    seconds = tracker.median(side, name, n)
    records = (replies[0].get('records') if replies else None)
    if seconds is None or not records:
        return seconds, records, None
    return seconds, records, seconds / records * 1e6


def _floor(results, tracker, data, what):
    name = what.split(' ', 1)[0]
    counts = report.Instructions(results)
    floor_name = dict((w, f) for w, f, _m in report.FLOOR_TARGETS)[name]
    ours = counts.value('ours', name, AT)
    floor = counts.value('ours', floor_name, AT)
    records = counts.value('ours', 'records', AT)
    if not ours or not floor or not records:
        return None
    return ('%s of %s records: %s instructions, its floor %s (%s and %s a '
            'record; CPU time: ours %s, floor %s). Per record ours is one '
            'dict lookup and one dict comparison, like the floor, plus the '
            'bookkeeping of the sync report.' % (
                name, report.fmt_n(records), report.fmt_count(ours),
                report.fmt_count(floor), report.fmt_count(ours / records),
                report.fmt_count(floor / records),
                report.fmt_time(tracker.median('ours', name, AT)),
                report.fmt_time(tracker.median('floor', 'resync', AT))))


def _nova_ratio(results, tracker, data, what):
    name = what.split(' ', 1)[0]
    ours, nova = tracker.median('ours', name, AT), tracker.median(
        'nova', name, AT)
    if ours is None or nova is None:
        return ('Nova was not run (`--sides ours`): no ratio to compare.')
    return ('%s at %s: ours %s (spread %s), Nova %s (spread %s); the '
            'ratio moves with both sides\' noise under load (load during '
            'the runs: %s).' % (
                name, report.fmt_n(AT), report.fmt_time(ours),
                report.spread(tracker.samples('ours', name, AT)),
                report.fmt_time(nova),
                report.spread(tracker.samples('nova', name, AT)),
                report.load_range(tracker.replies(AT))))


def _cli(results, tracker, data, what):
    label = what[len('CLI '):].split(' at ', 1)[0]
    start = data.value('base', label, 'cpu')
    at = data.value(AT, label, 'cpu')
    if at is None:
        return None
    loads = [s['load'] for s in data.samples(AT, label)]
    return ('`%s` at %s node devices: %s CPU, %s peak RSS; on the start-up '
            'base host (16 node devices) %s CPU and %s (interpreter, '
            'imports, libvirt, store: oslo.versionedobjects alone is %s '
            'and %s). Load average during its samples %.1f-%.1f on %s '
            'cores.' % (
                label, report.fmt_n(AT), report.fmt_time(at),
                report.fmt_mb(data.value(AT, label, 'rss_kib')),
                report.fmt_time(start),
                report.fmt_mb(data.value('base', label, 'rss_kib')),
                report.fmt_time(data.startup_value('ovo_import', 'cpu')),
                report.fmt_mb(data.startup_value('ovo_import', 'rss_kib')),
                min(loads), max(loads), results['machine']['cores']))


def _tracker_exponent(results, tracker, data, what):
    name = what.split(':', 1)[0]
    counts = report.Instructions(results)
    low, high = report.growth_span(counts.sides['ours'])
    a, b = counts.value('ours', name, low), counts.value('ours', name, high)
    if a is None or b is None:
        return None
    return ('%s: %s instructions at %s, %s at %s (CPU time: %s and %s).' % (
        name, report.fmt_count(a), report.fmt_n(low), report.fmt_count(b),
        report.fmt_n(high), report.fmt_time(tracker.median('ours', name, low)),
        report.fmt_time(tracker.median('ours', name, high))))


def _startup(results, tracker, data, what):
    loads = [s['load'] for key in ('ovo_import', 'help', 'devices')
             for s in data.startup.get(key, ())]
    return ('Start-up: `import oslo_versionedobjects.base` %s CPU / %s '
            'wall, `--help` %s / %s, `devices` on the sample host %s / %s; '
            'load average %.1f-%.1f during these samples.' % (
                report.fmt_time(data.startup_value('ovo_import', 'cpu')),
                report.fmt_time(data.startup_value('ovo_import', 'wall')),
                report.fmt_time(data.startup_value('help', 'cpu')),
                report.fmt_time(data.startup_value('help', 'wall')),
                report.fmt_time(data.startup_value('devices', 'cpu')),
                report.fmt_time(data.startup_value('devices', 'wall')),
                min(loads or [0]), max(loads or [0])))


def explain(results, what):
    """The commentary of the missed target ``what`` (its text in
    :func:`report.targets`), or None."""
    tracker = report.Tracker(results)
    data = report.Cli(results)
    if ' of its floor ' in what:
        return _floor(results, tracker, data, what)
    if 'faster than Nova' in what:
        return _nova_ratio(results, tracker, data, what)
    if what.startswith('CLI '):
        return _cli(results, tracker, data, what)
    if ': exponent' in what:
        return _tracker_exponent(results, tracker, data, what)
    if what.startswith(('sample host', '`--help`')):
        return _startup(results, tracker, data, what)
    return None


def redesign(results):
    """What issue 30's redesign (objects on oslo.versionedobjects' public
    API again, no template makers) cost or saved: our instruction counts
    against the baseline commit's, on the same records."""
    counts = report.Instructions(results)
    base = counts.baseline_commit
    records = counts.value('ours', 'records', AT)
    if not base or not counts.sides['baseline'].get(AT):
        return []
    parts = []
    for name, _title, _floor in report.WORKLOADS:
        new = counts.value('ours', name, AT)
        old = counts.value('baseline', name, AT)
        if new and old:
            parts.append('%s %s -> %s (%+.0f%%)' % (
                name, report.fmt_count(old), report.fmt_count(new),
                100.0 * (new - old) / old))
    first_new = counts.value('ours', 'first_sync', AT)
    first_old = counts.value('baseline', 'first_sync', AT)
    text = ('Against %s (the code before the redesign: ovo storage names '
            'replaced, objects made from templates with `cls.__new__`, '
            'hand-built UUIDs), on the same %s records, instructions of '
            'each tracker workload at %s: %s.' % (
                base[:10], report.fmt_n(records), report.fmt_n(AT),
                '; '.join(parts)))
    if first_new and first_old and records:
        text += (' Building the objects through oslo.versionedobjects\' '
                 'own constructor costs the first sync %s instructions a '
                 'record more (%s against %s). No later operation builds '
                 'an object: what resync, queries, claims and frees gained '
                 'or lost is what they read and write of objects through '
                 'ovo\'s own attributes.' % (
                     report.fmt_count((first_new - first_old) / records),
                     report.fmt_count(first_new / records),
                     report.fmt_count(first_old / records)))
    return ['## What the redesign cost or saved', '', text, '']


def section(results, rows):
    """Markdown lines: what the redesign cost or saved, then one paragraph
    per missed target."""
    lines = redesign(results)
    missed = [(what, value) for what, value, ok in rows if not ok]
    if not missed:
        return lines
    lines += ['## Targets missed, and why', '']
    for what, value in missed:
        text = explain(results, what)
        lines += ['**%s: %s.** %s' % (what, value, text or
                                      'No commentary for this target.'), '']
    return lines
