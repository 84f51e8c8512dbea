"""Timing helpers shared by both sides (standard library only: the Nova
side imports this module inside Nova's virtualenv).

Every sample is the CPU time of the benchmarking process
(``time.process_time``: the workloads are single-threaded and do no I/O,
the libvirt test driver runs inside the process), so that other processes
on a shared machine do not inflate it; ``BENCH_CLOCK=wall`` switches both
sides to ``time.perf_counter``. A full garbage collection runs before each
sample (outside it) so that one sample does not pay for the garbage of the
previous one. The garbage collector stays on while timing: both sides pay
for it as they would in a service.
"""

import gc
import os
import time
import warnings

CLOCK_NAME = os.environ.get('BENCH_CLOCK', 'cpu')
if CLOCK_NAME not in ('cpu', 'wall'):
    raise SystemExit('BENCH_CLOCK must be cpu or wall, got %r' % CLOCK_NAME)
clock = time.process_time if CLOCK_NAME == 'cpu' else time.perf_counter

#: First-sync samples per run on our side and the floor's (each on fresh
#: input): ours lasts tens of ms against a spread of ~30-50% between
#: samples, Nova's first sync 13 s at 10,000 devices (one a run).
FIRST_SYNCS = 3
#: A scheduler query is repeated until one sample lasts this long.
MIN_SAMPLE_SECONDS = 0.02
MAX_LOOPS = 20000


def load():
    """The machine's 1-minute load average (logged with every sample)."""
    return os.getloadavg()[0]


def serve(handlers, stdin=None, stdout=None):
    """Answer JSON requests, one per line, until end of input.

    Each request is ``{"op": NAME, ...}``; ``handlers[NAME](request)``
    returns a JSON-able dict, written back as one line with the 1-minute
    load average before and after (``load``). The runner keeps one such
    process per side alive, so that it can interleave the sides sample by
    sample without paying their imports again.
    """
    import json
    import sys
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        before = load()
        reply = handlers[request['op']](request)
        reply['load'] = [before, load()]
        stdout.write(json.dumps(reply) + '\n')
        stdout.flush()


def quiet_eventlet():
    """oslo.service and Nova import eventlet, which warns on import that it
    is deprecated; the benchmarks' output has no use for that."""
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')


def median(values):
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2.0


def timed(fn, *args, **kwargs):
    """(seconds, result) of one call of ``fn``."""
    gc.collect()
    start = clock()
    result = fn(*args, **kwargs)
    return clock() - start, result


def per_call(fn, loops=None):
    """(seconds per call, loops): ``fn()`` repeated ``loops`` times.

    Without ``loops``, one call calibrates how many calls make a sample of
    at least :data:`MIN_SAMPLE_SECONDS`; the caller passes that count back
    for the next samples so every sample of a series has the same loops.
    """
    if loops is None:
        first, _ = timed(fn)
        loops = max(1, min(MAX_LOOPS, int(MIN_SAMPLE_SECONDS /
                                          max(first, 1e-7)) + 1))
    gc.collect()
    start = clock()
    for _ in range(loops):
        fn()
    return (clock() - start) / loops, loops


def repeated(fn, fresh, loops=None, check=None):
    """(seconds per call, loops): ``fn(fresh())`` called ``loops`` times,
    each call timed on its own (a full collection and ``fresh()``, the
    call's new input, before it, untimed), the times summed.

    Without ``loops``, the first call calibrates how many calls make a
    sample of at least :data:`MIN_SAMPLE_SECONDS` (as :func:`per_call`);
    the caller passes that count back for the next samples. ``check`` is
    applied to every call's result. For workloads too short to time once
    (a resync of a few hundred records), on both sides alike.
    """
    total = 0.0
    count = loops or 1
    done = 0
    while done < count:
        seconds, result = timed(fn, fresh())
        if check is not None:
            check(result)
        total += seconds
        done += 1
        if loops is None and done == 1:
            count = max(1, min(MAX_LOOPS, int(MIN_SAMPLE_SECONDS /
                                              max(seconds, 1e-7)) + 1))
    return total / count, count


def batch(fn, items):
    """Seconds per item of ``fn(item)`` over ``items`` (one sample)."""
    items = list(items)
    gc.collect()
    start = clock()
    for item in items:
        fn(item)
    return (clock() - start) / len(items)
