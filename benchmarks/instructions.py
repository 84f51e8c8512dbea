"""Instruction counts of the tracker workloads (valgrind's callgrind).

CPU time on a shared core moves with the machine's load; the number of
instructions a workload executes does not. The growth exponents of the
tracker workloads and the ours/floor ratios are judged by these counts
(issue 30); the CPU-time tables stay for the ratios against Nova, which
run side by side.

One child process per size runs under ``valgrind --tool=callgrind
--dump-before=os_getppid*`` with ``PYTHONHASHSEED=0``: it builds what the
workloads need (untimed set-up: imports, settings, the records read from
their file), then runs every workload once in the order of
:func:`benchmarks.ours.one_run` (each sync on a fresh ``json.loads``,
parsed before the phase starts) and calls ``os.getppid()`` at the end of
each phase, then again after a full collection. Callgrind writes its
counters at every such call and starts again from zero, so each phase has
a dump of its own (plus the few hundred instructions of the call), and no
phase pays for the garbage of the one before. ``claim`` and ``free`` are per
instance (:data:`benchmarks.ours.CLAIMS` of each, divided). The floors'
``first_sync`` and ``resync`` (:mod:`benchmarks.floors`) run in the same
process after ours, as phases of their own.

``python -m benchmarks.instructions --records PATH --labels OUT`` is the
child;
:func:`count` runs it under valgrind and reads the dumps.
"""

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

from benchmarks import floors
from benchmarks import ours

#: Phases counted per instance (CLAIMS of each in the phase).
PER_INSTANCE = ('claim', 'free')
_TOTALS = re.compile(r'^(?:totals|summary):\s*(\d+)', re.M)


def available():
    """valgrind's path, or None."""
    return shutil.which('valgrind')


class _Phases:
    """Ends phases: callgrind dumps its counters at every ``os.getppid()``
    call, and the labels say which dump is which phase."""

    def __init__(self):
        self.labels = []

    def end(self, label):
        """The code since the last call was phase ``label`` (None: not
        counted); then a full collection (its own, uncounted dump), so
        that no phase pays for the garbage of the one before."""
        self.labels.append(label)
        os.getppid()
        gc.collect()
        self.labels.append(None)
        os.getppid()


def child(records_path, labels_path):
    """Run every phase once; the counts are callgrind's dumps, the labels
    of the dumps go to ``labels_path`` (JSON)."""
    with open(records_path) as f:
        text = f.read()
    phases = _Phases()
    with tempfile.TemporaryDirectory(prefix='bench-instr-') as workdir:
        bench = ours.Bench(workdir)
        applied = json.loads(text)
        gone = ours.removed_address(applied)
        count = len(applied)
        del applied
        requests = {p: bench.requests(p) for p in ours.POLICIES}
        instances = [(str(uuid.UUID(int=i + 1)), bench.requests())
                     for i in range(ours.CLAIMS)]
        _warm_up(bench, text, requests, instances)
        tracker = bench.tracker()
        fresh = json.loads(text)
        phases.end('setup')
        report = tracker.sync(fresh)
        phases.end('first_sync')
        assert len(report.added) == count, 'first sync adds every record'
        fresh = json.loads(text)
        phases.end(None)
        report = tracker.sync(fresh)
        phases.end('resync_nochange')
        assert not any(report), 'a resync without change changes nothing'
        scheduler = bench.stats.PciDeviceStats.from_pools(
            tracker.stats.to_pool_list(), bench.topology)
        phases.end(None)
        for policy in ours.POLICIES:
            # Checked once uncounted, as benchmarks.ours does before it
            # times the query.
            assert scheduler.support_requests(
                requests[policy], ours.INSTANCE_CELLS), policy
            phases.end(None)
            ok = scheduler.support_requests(requests[policy],
                                            ours.INSTANCE_CELLS)
            phases.end('query_' + policy)
            assert ok, 'the host supports vGPU:1 (%s)' % policy
        claimed = []
        for instance, reqs in instances:
            claimed.extend(tracker.claim_instance(instance, reqs,
                                                  ours.INSTANCE_CELLS))
        phases.end('claim')
        freed = []
        for instance, _reqs in instances:
            freed.extend(tracker.free_instance(instance))
        phases.end('free')
        assert len(claimed) == len(freed) == ours.CLAIMS, 'claims and frees'
        without = [r for r in json.loads(text) if r['address'] != gone]
        phases.end(None)
        report = tracker.sync(without)
        phases.end('resync_removed')
        assert gone in report.removed, 'the resync removes the VF'
        fresh = json.loads(text)
        phases.end(None)
        devices, _counts = floors.first_sync(fresh)
        phases.end('floor_first_sync')
        applied = {r['address']: r for r in json.loads(text)}
        fresh = json.loads(text)
        phases.end(None)
        changed, same = floors.resync(applied, fresh)
        phases.end('floor_resync')
        assert not changed and same and len(devices) == count
    with open(labels_path, 'w') as f:
        json.dump(phases.labels, f)


def _warm_up(bench, text, requests, instances):
    """Every code path once on a tracker of its own (set-up): the counts
    are then those of a process that has served before, as the CPU-time
    samples are (first calls compile regular expressions, fill caches)."""
    tracker = bench.tracker()
    tracker.sync(json.loads(text))
    tracker.sync(json.loads(text))
    scheduler = bench.stats.PciDeviceStats.from_pools(
        tracker.stats.to_pool_list(), bench.topology)
    for policy in ours.POLICIES:
        scheduler.support_requests(requests[policy], ours.INSTANCE_CELLS)
    for instance, reqs in instances:
        tracker.claim_instance(instance, reqs, ours.INSTANCE_CELLS)
        tracker.free_instance(instance)
    floors.first_sync(json.loads(text))
    floors.resync({}, json.loads(text))


def count(records_path, tree=None):
    """``{phase: instructions}`` of one child run on ``records_path``
    (claim and free per instance, and the number of ``records``), or None
    when valgrind is missing. ``tree``: a directory holding another
    version's ``nova_pci_mdev`` and ``benchmarks`` (:func:`baseline_tree`),
    whose code is counted instead (this module's child drives it)."""
    valgrind = available()
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory(prefix='bench-callgrind-') as tmp:
        out = os.path.join(tmp, 'cg.out')
        env = dict(os.environ, PYTHONHASHSEED='0')
        env.pop('PYTHONDONTWRITEBYTECODE', None)
        labels = os.path.join(tmp, 'labels.json')
        child_argv = ['-m', 'benchmarks.instructions']
        if tree is not None:
            # This file as a script; everything it imports from the tree.
            env['PYTHONPATH'] = tree
            child_argv = [os.path.abspath(__file__)]
        done = subprocess.run(
            [valgrind, '--tool=callgrind', '--dump-before=os_getppid*',
             '--callgrind-out-file=' + out, sys.executable, '-W', 'ignore']
            + child_argv + ['--records', records_path, '--labels', labels],
            env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit('benchmark: the callgrind run failed:\n%s'
                             % done.stderr[-3000:])
        with open(labels) as f:
            names = json.load(f)
        counts = {}
        for index, name in enumerate(names, 1):
            if name is None:
                continue
            with open('%s.%d' % (out, index)) as f:
                value = int(_TOTALS.search(f.read()).group(1))
            counts[name] = (value / ours.CLAIMS if name in PER_INSTANCE
                            else value)
    with open(records_path) as f:
        counts['records'] = len(json.load(f))
    return counts


def baseline_tree(commit, workdir):
    """``nova_pci_mdev`` and ``benchmarks`` of ``commit`` (``git archive``
    of this checkout) in a directory under ``workdir``; its path."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tree = os.path.join(workdir, 'baseline-%s' % commit)
    os.makedirs(tree)
    archive = subprocess.run(
        ['git', '-C', root, 'archive', '--format=tar', commit,
         'nova_pci_mdev', 'benchmarks'], check=True, capture_output=True)
    subprocess.run(['tar', '-x', '-C', tree], input=archive.stdout,
                   check=True)
    return tree


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--records', required=True)
    parser.add_argument('--labels', required=True)
    args = parser.parse_args(argv)
    child(args.records, args.labels)
    return 0


if __name__ == '__main__':
    sys.exit(main())
