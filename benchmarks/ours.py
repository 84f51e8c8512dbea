"""The workloads on nova-pci-mdev (run by :mod:`benchmarks.run` in a child
process of the project's virtualenv, so that each side has a heap of its
own).

Per size N, each run builds a fresh tracker and times, in order:

* ``first_sync``: ``PciDevTracker.sync(records)`` on an empty tracker;
* ``resync_nochange``: ``sync`` of the same records again;
* ``query_<policy>``: ``PciDeviceStats.support_requests`` of a scheduler's
  stats (``PciDeviceStats.from_pools`` of the tracker's pool list) for the
  1-device alias ``vGPU:1`` with ``hw:pci_numa_affinity_policy=<policy>``
  and an instance on NUMA cell 1 (time per query);
* ``claim`` / ``free``: ``claim_instance`` of ``vGPU:1`` for
  :data:`CLAIMS` instances (cell 1, no policy in the flavor: legacy), then
  ``free_instance`` of each (time per instance);
* ``resync_removed``: ``sync`` of the records without one free VF.

``discovery``: ``Host(conn).discover(settings)`` on the real libvirt test
driver (``test:///<file>`` of :func:`hostgen.host_xml`) with N node
devices, end to end to device records (``libvirt_open``, the driver
parsing the file, is timed apart). ``--rss N`` runs discovery, the sync
workloads, a query, claims and frees of one host in a fresh process and
prints its peak RSS (``ru_maxrss``).

Nothing is persisted: the tracker only collects its changes in memory.
"""

import argparse
import copy
import json
import os
import resource
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

    def requests(self, policy=None):
        extra_specs = {self.request.ALIAS_SPEC: '%s:1' % hostgen.ALIAS_NAME}
        if policy is not None:
            extra_specs[self.request.NUMA_POLICY_SPEC] = policy
        return self.request.requests_from_extra_specs(
            extra_specs, self.settings.aliases)

    def tracker(self):
        return self.manager.PciDevTracker(self.settings.whitelist,
                                          self.topology)


def removed_address(records):
    """The free SR-IOV VF the ``resync_removed`` workload drops."""
    vfs = [r['address'] for r in records if r['dev_type'] == 'type-VF']
    return vfs[len(vfs) // 2]


def _check(condition, what):
    if not condition:
        raise AssertionError('benchmark sanity check failed: %s' % what)


def run_tracker(bench, n, runs):
    """{workload: [seconds per sample]} for a host of ``n`` records."""
    records = hostgen.records(hostgen.generate(n))
    gone = removed_address(records)
    without = [r for r in records if r['address'] != gone]
    samples = {}

    def add(name, seconds):
        samples.setdefault(name, []).append(seconds)

    loops = {}
    for _ in range(runs):
        tracker = bench.tracker()
        seconds, report = timing.timed(tracker.sync, copy.deepcopy(records))
        _check(len(report.added) == n, 'first sync adds %d devices' % n)
        add('first_sync', seconds)

        seconds, report = timing.timed(tracker.sync, copy.deepcopy(records))
        _check(not any(report), 'a resync without change changes nothing')
        add('resync_nochange', seconds)

        scheduler = bench.stats.PciDeviceStats.from_pools(
            tracker.stats.to_pool_list(), bench.topology)
        for policy in POLICIES:
            requests = bench.requests(policy)
            _check(scheduler.support_requests(requests, INSTANCE_CELLS),
                   'the host supports vGPU:1 with policy %s' % policy)
            seconds, loops[policy] = timing.per_call(
                lambda: scheduler.support_requests(requests, INSTANCE_CELLS),
                loops.get(policy))
            add('query_' + policy, seconds)

        instances = [(str(uuid.uuid4()), bench.requests())
                     for _ in range(CLAIMS)]
        claimed = []
        add('claim', timing.batch(
            lambda item: claimed.extend(tracker.claim_instance(
                item[0], item[1], INSTANCE_CELLS)), instances))
        _check(len(claimed) == CLAIMS and all(
            d.dev_type == 'mdev-vf' and d.numa_node == 1 for d in claimed),
            'each claim takes one vGPU slot on NUMA node 1')
        freed = []
        add('free', timing.batch(
            lambda item: freed.extend(tracker.free_instance(item[0])),
            instances))
        _check(len(freed) == CLAIMS, 'each free releases one device')

        seconds, report = timing.timed(tracker.sync, copy.deepcopy(without))
        _check(report.removed == (gone,), 'the resync removes %s' % gone)
        add('resync_removed', seconds)
    return samples


def write_host(bench, host):
    path = os.path.join(bench.workdir, 'host-%s-%d.xml' % (host.unit,
                                                           host.size))
    with open(path, 'w') as f:
        f.write(hostgen.host_xml(host))
    return path


def run_discovery(bench, n, runs):
    """{'libvirt_open': [...], 'discovery': [...]}, and the record count,
    for a host of ``n`` node devices."""
    import libvirt

    from nova_pci_mdev.virt.libvirt import host as host_mod

    host = hostgen.generate(n, unit='nodes')
    path = write_host(bench, host)
    expected = hostgen.records(host)
    samples = {'libvirt_open': [], 'discovery': []}
    for _ in range(runs):
        seconds, conn = timing.timed(libvirt.open, 'test://' + path)
        samples['libvirt_open'].append(seconds)
        adapter = host_mod.Host(conn, nodename=hostgen.NODENAME)
        seconds, found = timing.timed(adapter.discover, bench.settings)
        samples['discovery'].append(seconds)
        _check(found == expected, 'discovery finds the generated devices')
        conn.close()
    return samples, len(expected)


def peak_rss(bench, n, unit):
    """End to end on one host in this (fresh) process; peak RSS in KiB."""
    import libvirt

    from nova_pci_mdev.virt.libvirt import host as host_mod

    host = hostgen.generate(n, unit=unit)
    path = write_host(bench, host)
    del host
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conn = libvirt.open('test://' + path)
    records = host_mod.Host(conn, nodename=hostgen.NODENAME).discover(
        bench.settings)
    tracker = bench.tracker()
    tracker.sync(records)
    tracker.sync(host_mod.Host(conn, nodename=hostgen.NODENAME).discover(
        bench.settings))
    scheduler = bench.stats.PciDeviceStats.from_pools(
        tracker.stats.to_pool_list(), bench.topology)
    for policy in POLICIES:
        scheduler.support_requests(bench.requests(policy), INSTANCE_CELLS)
    instances = [str(uuid.uuid4()) for _ in range(CLAIMS)]
    for instance in instances:
        tracker.claim_instance(instance, bench.requests(), INSTANCE_CELLS)
    for instance in instances:
        tracker.free_instance(instance)
    tracker.pop_changes()
    return {'records': len(records), 'devices': len(tracker.devices),
            'baseline_kib': before,
            'peak_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--input', help='JSON: {"sizes": [...], "runs": '
                        '{N: runs}, "discovery_sizes": [...], '
                        '"discovery_runs": n}')
    parser.add_argument('--output', help='where to write the JSON results')
    parser.add_argument('--rss', type=int, metavar='N',
                        help='print the peak RSS of one host of N devices')
    parser.add_argument('--unit', default='records',
                        choices=('records', 'nodes'))
    args = parser.parse_args(argv)
    timing.quiet_eventlet()
    with tempfile.TemporaryDirectory(prefix='bench-ours-') as workdir:
        bench = Bench(workdir)
        if args.rss:
            json.dump(peak_rss(bench, args.rss, args.unit), sys.stdout)
            print()
            return 0
        with open(args.input) as f:
            plan = json.load(f)
        results = {'tracker': {}, 'discovery': {}, 'discovery_records': {}}
        for n in plan['sizes']:
            results['tracker'][n] = run_tracker(bench, n,
                                                plan['runs'][str(n)])
            print('ours: %d devices done' % n, file=sys.stderr)
        for n in plan.get('discovery_sizes', ()):
            samples, count = run_discovery(bench, n, plan['discovery_runs'])
            results['discovery'][n] = samples
            results['discovery_records'][n] = count
            print('ours: discovery of %d node devices done' % n,
                  file=sys.stderr)
    with open(args.output, 'w') as f:
        json.dump(results, f)
    return 0


if __name__ == '__main__':
    sys.exit(main())
