"""Why a target was missed: the commentary of RESULTS.md, from the run.

:func:`explain` gives, for one missed target of :func:`report.targets`,
what the run measured around it (from the raw results, never typed in)
and what the cost is made of, as far as profiling showed when the text
was written. The prose names what was measured; every number comes from
the run being reported, except the shares of a profile, which say when
they were taken. A target that is met gets no commentary.
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


def _first_sync(results, tracker, data):
    ours, records, ours_us = _per_record(tracker, 'ours', 'first_sync')
    floor, _r, floor_us = _per_record(tracker, 'floor', 'first_sync')
    if ours is None or floor is None:
        return None
    text = ('At %s devices (%s records) the first sync took %s, the floor '
            '%s: %s.' % (report.fmt_n(AT), report.fmt_n(records),
                         report.fmt_time(ours), report.fmt_time(floor),
                         report.fmt_ratio(report.ratio(floor, ours))))
    if ours_us is not None:
        text += (' Per record that is %.1f µs against %.1f µs: the floor '
                 'copies a dict and counts a pool key; ours builds a real '
                 'oslo.versionedobjects `PciDevice` (every field stored as '
                 'its field\'s `coerce` returns it, the changes recorded, '
                 'an `extra_info` dict of its own, a random UUID; records '
                 'of one shape share their validated values and the names '
                 'of their changes, `objects.bulk`), matches it against '
                 'the whitelist and puts it in its pool. Counted in '
                 'instructions when this text was written (callgrind, '
                 '2026-12-02, one first sync of the 5,716 records after a '
                 'warm-up, teardown not counted): about 505M against the '
                 'floor\'s about 44M, 11.5x (both run at about 8.8G '
                 'instructions/s here; interleaved A/B runs of 15 first '
                 'syncs on a quiet machine gave 11-13x in time). Of these, '
                 'making the '
                 'objects 239M (the object itself about 92M, finding its '
                 'shape\'s template 72M, UUIDs about 46M), the pools 134M '
                 '(about 23K a device; reading add_device\'s 8 fields from '
                 'the device\'s dict instead of through their properties '
                 'gave 510M against 514M, within the 1%% run-to-run noise, '
                 'tried after this run), the whitelist '
                 '78M, links 28M, statuses 12M, bookkeeping 15M. '
                 '10x would need about 65M fewer, 11K of the 88K '
                 'instructions a record; the last changes (a shared record '
                 'of changes: 1,547 -> 819 bytes a made device) took off '
                 '4%%. Resync and every later operation build '
                 'nothing.' % (ours_us, floor_us))
    return text


def _resync(results, tracker, data):
    ours, records, _u = _per_record(tracker, 'ours', 'resync_nochange')
    floor, _r, _f = _per_record(tracker, 'floor', 'resync')
    if ours is None or floor is None:
        return None
    return ('Resync of %s unchanged records: %s, floor %s. Per record ours '
            'is one dict lookup and one dict comparison, like the floor, '
            'plus the bookkeeping of the sync report; the spread of both '
            'rows is in the table above.' % (
                report.fmt_n(records), report.fmt_time(ours),
                report.fmt_time(floor)))


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
    label = what[len('CLI '):].split(' at ', 1)[0].split(':', 1)[0]
    start = data.value('sample', label, 'cpu')
    at = data.value(AT, label, 'cpu')
    if at is None:
        return None
    loads = [s['load'] for s in data.samples(AT, label)]
    return ('`%s` at %s node devices: %s CPU, %s peak RSS, on the sample '
            'host %s CPU (interpreter, imports: oslo.versionedobjects alone '
            'is %s). Load average during its samples %.1f-%.1f on %s cores: '
            'CPU time of a process also grows with the load of a shared '
            'machine (caches, frequency), less than wall time does.' % (
                label, report.fmt_n(AT), report.fmt_time(at),
                report.fmt_mb(data.value(AT, label, 'rss_kib')),
                report.fmt_time(start),
                report.fmt_time(data.startup_value('ovo_import', 'cpu')),
                min(loads), max(loads), results['machine']['cores']))


def _cli_exponent(results, tracker, data, what):
    label = what[len('CLI '):].split(':', 1)[0]
    low, high = report.growth_span(data.sizes)
    nets = {n: data.net(n, label) for n in (low, high)}
    base = data.base_label()
    if None in nets.values():
        return None
    return ('`%s`: %s at %s node devices and %s at %s above start-up '
            '(less the same command on the %s host, round by round; '
            'spreads of the CPU times in the tables above). The exponent '
            'of a difference of two noisy CPU times is itself noisy when '
            'the smaller difference is a few tens of ms.' % (
                label, report.fmt_time(nets[low]), report.fmt_n(low),
                report.fmt_time(nets[high]), report.fmt_n(high), base))


def _tracker_exponent(results, tracker, data, what):
    name = what.split(':', 1)[0]
    low, high = report.growth_span(tracker.sides['ours'])
    a, b = tracker.median('ours', name, low), tracker.median(
        'ours', name, high)
    if a is None or b is None:
        return None
    return ('%s: %s at %s, %s at %s (spreads %s and %s).' % (
        name, report.fmt_time(a), report.fmt_n(low), report.fmt_time(b),
        report.fmt_n(high), report.spread(tracker.samples('ours', name, low)),
        report.spread(tracker.samples('ours', name, high))))


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
    if what.startswith('first_sync within'):
        return _first_sync(results, tracker, data)
    if what.startswith('resync_nochange within'):
        return _resync(results, tracker, data)
    if 'faster than Nova' in what:
        return _nova_ratio(results, tracker, data, what)
    if what.startswith('CLI ') and 'exponent' in what:
        return _cli_exponent(results, tracker, data, what)
    if what.startswith('CLI '):
        return _cli(results, tracker, data, what)
    if ': exponent' in what:
        return _tracker_exponent(results, tracker, data, what)
    if what.startswith(('sample host', '`--help`')):
        return _startup(results, tracker, data, what)
    return None


def section(results, rows):
    """Markdown lines: one paragraph per missed target."""
    missed = [(what, value) for what, value, ok in rows if not ok]
    if not missed:
        return []
    lines = ['## Targets missed, and why', '']
    for what, value in missed:
        text = explain(results, what)
        lines += ['**%s: %s.** %s' % (what, value, text or
                                      'No commentary for this target.'), '']
    return lines
