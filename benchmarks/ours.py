"""The workloads on nova-pci-mdev: a worker process of the runner.

``python -m benchmarks.ours --serve`` answers one JSON request per line
(:func:`benchmarks.timing.serve`), so that :mod:`benchmarks.run` can
interleave it with the Nova side sample by sample; each side keeps a heap
of its own.

``{"op": "tracker", "n": N, "records": PATH}``: one run on a fresh
tracker (N counts the host's devices as Nova lists them, every mdev slot
included; our records count the slots still to create on their parent),
one sample of each workload, in this order:

* ``first_sync``: ``PciDevTracker.sync(records)`` on an empty tracker
  (:data:`benchmarks.timing.FIRST_SYNCS` samples, a new tracker each; the
  last one goes on);
* ``resync_nochange``: ``sync`` of the same records again (repeated
  until a sample lasts 20 ms, each call timed on its own, as on the Nova
  side: :func:`benchmarks.timing.repeated`);
* ``query_<policy>``: ``PciDeviceStats.support_requests`` of a scheduler's
  stats (``PciDeviceStats.from_pools`` of the tracker's pool list) for the
  1-device alias ``vGPU:1`` with ``hw:pci_numa_affinity_policy=<policy>``
  and an instance on NUMA cell 1 (time per query);
* ``claim`` / ``free``: ``claim_instance`` of ``vGPU:1`` for
  :data:`CLAIMS` instances (cell 1, no policy in the flavor: legacy), then
  ``free_instance`` of each (time per instance);
* ``resync_removed``: ``sync`` of the records without one free VF.

Every sync gets its own ``json.loads`` of the records file (untimed): fresh
dicts and strings, as a hypervisor would hand over, never objects shared
with what the tracker applied before. The reply also gives the number of
pools the query ran on.

``{"op": "discovery", "n": N, "host": PATH}``: one sample of
``libvirt.open`` of the ``test:///`` host file and of
``Host(conn).discover(settings)``, checked against
``hostgen.records(hostgen.generate(N, unit='nodes'))``.

Nothing is persisted: the tracker only collects its changes in memory.
"""

import argparse
import json
import os
import sys
import tempfile
import uuid

from benchmarks import hostgen
from benchmarks import timing

POLICIES = ('required', 'legacy', 'preferred', 'socket')
INSTANCE_CELLS = (1,)
CLAIMS = 10


class Bench:
    """The project's objects the workloads use, built once per process."""

    def __init__(self, workdir):
        from nova_pci_mdev import conf
        from nova_pci_mdev import numa
        from nova_pci_mdev import objects
        from nova_pci_mdev.pci import manager
        from nova_pci_mdev.pci import request
        from nova_pci_mdev.pci import stats

        objects.register_all()
        self.manager, self.request, self.stats = manager, request, stats
        conf_path = os.path.join(workdir, 'nova.conf')
        with open(conf_path, 'w') as f:
            f.write(hostgen.NOVA_CONF)
        self.settings = conf.load_settings(conf.new_config([conf_path]))
        self.topology = numa.HostTopology(cells=tuple(
            numa.HostCell(id=i, socket=i) for i in range(hostgen.NUMA_NODES)))
        self.workdir = workdir
        self.loops = {}          # (n, workload) -> loops per sample
        self.expected = {}       # n -> discovery's expected records

    def requests(self, policy=None):
        extra_specs = {self.request.ALIAS_SPEC: '%s:1' % hostgen.ALIAS_NAME}
        if policy is not None:
            extra_specs[self.request.NUMA_POLICY_SPEC] = policy
        return self.request.requests_from_extra_specs(
            extra_specs, self.settings.aliases)

    def tracker(self):
        from nova_pci_mdev.virt.libvirt import records
        return self.manager.PciDevTracker(
            self.settings.whitelist, self.topology,
            slot_factory=records.SlotFactory(hostgen.NODENAME))


def removed_address(records):
    """The free SR-IOV VF the ``resync_removed`` workload drops."""
    vfs = [r['address'] for r in records if r['dev_type'] == 'type-VF']
    return vfs[len(vfs) // 2]


def _check(condition, what):
    if not condition:
        raise AssertionError('benchmark sanity check failed: %s' % what)


def one_run(bench, n, text):
    """One sample of every tracker workload on ``n`` records (the JSON
    ``text`` of the records); returns ``{'samples': ..., 'pools': k}``."""
    applied = json.loads(text)
    gone = removed_address(applied)
    count = len(applied)
    del applied
    samples = {'first_sync': []}
    for _ in range(timing.FIRST_SYNCS):
        tracker = bench.tracker()
        seconds, report = timing.timed(tracker.sync, json.loads(text))
        _check(len(report.added) == count,
               'first sync adds %d records' % count)
        samples['first_sync'].append(seconds)

    key = (n, 'resync_nochange')
    samples['resync_nochange'], bench.loops[key] = timing.repeated(
        tracker.sync, lambda: json.loads(text), bench.loops.get(key),
        lambda report: _check(not any(report),
                              'a resync without change changes nothing'))

    pool_list = tracker.stats.to_pool_list()
    scheduler = bench.stats.PciDeviceStats.from_pools(pool_list,
                                                      bench.topology)
    for policy in POLICIES:
        requests = bench.requests(policy)
        _check(scheduler.support_requests(requests, INSTANCE_CELLS),
               'the host supports vGPU:1 with policy %s' % policy)
        key = (n, policy)
        seconds, bench.loops[key] = timing.per_call(
            lambda: scheduler.support_requests(requests, INSTANCE_CELLS),
            bench.loops.get(key))
        samples['query_' + policy] = seconds

    instances = [(str(uuid.uuid4()), bench.requests())
                 for _ in range(CLAIMS)]
    claimed = []
    samples['claim'] = timing.batch(
        lambda item: claimed.extend(tracker.claim_instance(
            item[0], item[1], INSTANCE_CELLS)), instances)
    _check(len(claimed) == CLAIMS and all(
        d.dev_type == 'mdev-vf' and d.numa_node == 1 for d in claimed),
        'each claim takes one vGPU slot on NUMA node 1')
    freed = []
    samples['free'] = timing.batch(
        lambda item: freed.extend(tracker.free_instance(item[0])),
        instances)
    _check(len(freed) == CLAIMS, 'each free releases one device')

    without = [r for r in json.loads(text) if r['address'] != gone]
    listed = {r['address'] for r in without}
    seconds, report = timing.timed(tracker.sync, without)
    # Slots the claims made for mdevs still to create are not listed by a
    # host that never created them: the resync drops them too.
    _check(gone in report.removed and all(
        a == gone or a not in listed for a in report.removed),
        'the resync removes %s' % gone)
    samples['resync_removed'] = seconds
    return {'samples': samples, 'pools': len(pool_list), 'records': count}


def one_discovery(bench, n, host_path):
    """One sample of ``libvirt.open`` and of ``Host.discover``."""
    import libvirt

    from nova_pci_mdev.virt.libvirt import host as host_mod

    if n not in bench.expected:
        bench.expected[n] = hostgen.records(hostgen.generate(n, unit='nodes'))
    expected = bench.expected[n]
    opened, conn = timing.timed(libvirt.open, 'test://' + host_path)
    try:
        adapter = host_mod.Host(conn, nodename=hostgen.NODENAME)
        seconds, found = timing.timed(adapter.discover, bench.settings)
    finally:
        conn.close()
    _check(found == expected, 'discovery finds the generated devices')
    return {'samples': {'libvirt_open': opened, 'discovery': seconds},
            'records': len(found)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--serve', action='store_true', required=True,
                        help='answer JSON requests on stdin (one a line)')
    parser.parse_args(argv)
    texts = {}

    def tracker(request):
        path = request['records']
        if path not in texts:
            with open(path) as f:
                texts[path] = f.read()
        return one_run(bench, request['n'], texts[path])

    with tempfile.TemporaryDirectory(prefix='bench-ours-') as workdir:
        bench = Bench(workdir)
        timing.serve({
            'tracker': tracker,
            'discovery': lambda r: one_discovery(bench, r['n'], r['host']),
        })
    return 0


if __name__ == '__main__':
    sys.exit(main())
