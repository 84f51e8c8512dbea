"""The same workloads on upstream Nova 34.0.0, inside Nova's virtualenv.

Run by :mod:`benchmarks.run` as ``<nova venv>/bin/python -m
benchmarks.nova_side --plan PLAN --serve`` from the repository root: a
worker that answers one JSON request per line
(:func:`benchmarks.timing.serve`), ``{"op": "tracker", "devices": PATH,
"remove": ADDRESS}`` with one sample of every workload, so that the
runner can interleave it with our side sample by sample.
It imports nothing of nova-pci-mdev (only :mod:`benchmarks.timing`, which
is standard library): the devices come from the input file, already in
Nova's ``dev_dict`` form (:func:`benchmarks.hostgen.nova_devices`).

Nova's public classes do the work: ``nova.pci.manager.PciDevTracker``
(``update_devices_from_hypervisor_resources``, ``claim_instance``,
``free_instance``), ``nova.pci.stats.PciDeviceStats`` (``support_requests``
on stats built from the tracker's ``PciDevicePoolList``, as the scheduler's
HostState does), ``nova.pci.request.get_pci_requests_from_flavor`` and
``nova.objects`` (``ComputeNode``, ``NUMATopology``, ``NUMACell``,
``InstanceNUMATopology``, ``InstanceNUMACell``, ``InstancePCIRequests``,
``Flavor``). Configuration goes through Nova's ``CONF.set_override`` of
``[pci] device_spec`` and ``[pci] alias``.

Stubbed, and nothing else: ``nova.db.main.api.pci_device_get_all_by_node``
returns ``[]`` (the tracker's constructor loads the node's devices with
``PciDeviceList.get_by_compute_node``; a new tracker starts empty, as ours
does). No workload calls ``PciDevTracker.save``, so nothing is persisted;
after the first sync (not timed) each device gets the ``id`` that save()
would have given it (1..N: ``PciDevice.free`` compares devices by id),
and no other database call happens: no ``[database] connection`` is
configured, so one would fail.
"""

import argparse
import json
import sys
import uuid

from benchmarks import timing


def _setup(plan):
    import nova.conf
    from nova import context as nova_context
    from nova.db.main import api as db_api
    from nova import objects

    objects.register_all()
    conf = nova.conf.CONF
    conf([], project='nova', default_config_files=[])
    conf.set_override('device_spec', plan['device_spec'], group='pci')
    conf.set_override('alias', plan['alias'], group='pci')

    def no_devices(context, node_id):
        return []

    db_api.pci_device_get_all_by_node = no_devices
    return nova_context.get_admin_context()


def _topology(cells):
    from nova import objects

    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=i, socket=i, cpuset=set(range(i * 8, i * 8 + 8)),
            pcpuset=set(), memory=16384, cpu_usage=0, memory_usage=0,
            pinned_cpus=set(), siblings=[{c} for c in range(i * 8, i * 8 + 8)],
            mempages=[], network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))
        for i in range(cells)])


def _check(condition, what):
    if not condition:
        raise AssertionError('benchmark sanity check failed: %s' % what)


class Size:
    """The inputs of one size, built once: the JSON payloads of the host's
    devices (and without the removed VF), Nova's topology objects."""

    def __init__(self, plan, devices, gone):
        from nova import objects

        self.n = len(devices)
        self.gone = gone
        self.payload = json.dumps(devices)
        self.payload_without = json.dumps(
            [d for d in devices if d['address'] != gone])
        self.topology = _topology(plan['numa_nodes'])
        self.compute_node = objects.ComputeNode(
            id=1, numa_topology=self.topology._to_json())
        self.instance_cells = [objects.InstanceNUMACell(
            id=c, cpuset=set(), pcpuset={c}, memory=1024)
            for c in plan['instance_cells']]
        self.instance_topology = objects.InstanceNUMATopology(
            cells=self.instance_cells)
        self.loops = {}


def _requests(plan, policy=None):
    from nova import objects
    from nova.pci import request as pci_request

    extra_specs = {'pci_passthrough:alias': '%s:1' % plan['alias_name']}
    if policy is not None:
        extra_specs['hw:pci_numa_affinity_policy'] = policy
    return pci_request.get_pci_requests_from_flavor(
        objects.Flavor(extra_specs=extra_specs))


def one_run(context, plan, size):
    """One sample of every workload on a fresh tracker."""
    from nova.pci import manager
    from nova.pci import stats

    n = size.n
    samples = {}
    tracker = manager.PciDevTracker(context, size.compute_node)
    seconds, _ = timing.timed(
        tracker.update_devices_from_hypervisor_resources, size.payload)
    _check(len(tracker.pci_devs) == n, 'first sync adds %d devices' % n)
    samples['first_sync'] = seconds
    # What save() would leave behind: the ids the database assigns
    # (PciDevice.free compares devices by id). Not timed.
    for number, dev in enumerate(tracker.pci_devs, 1):
        dev.id = number

    # Repeated until a sample lasts 20 ms, as on our side (the payload is
    # JSON text: every call parses fresh objects from it).
    samples['resync_nochange'], size.loops['resync_nochange'] = (
        timing.repeated(
            tracker.update_devices_from_hypervisor_resources,
            lambda: size.payload, size.loops.get('resync_nochange'),
            lambda _: _check(len(tracker.pci_devs) == n,
                             'the resync keeps %d devices' % n)))

    pools = tracker.stats.to_device_pools_obj()
    scheduler = stats.PciDeviceStats(size.topology, stats=pools)
    cells = size.instance_cells
    for policy in plan['policies']:
        reqs = _requests(plan, policy).requests
        _check(scheduler.support_requests(reqs, None, cells),
               'the host supports the alias with policy %s' % policy)
        seconds, size.loops[policy] = timing.per_call(
            lambda: scheduler.support_requests(reqs, None, cells),
            size.loops.get(policy))
        samples['query_' + policy] = seconds

    instances = []
    for _ in range(plan['claims']):
        instance_uuid = str(uuid.uuid4())
        pci_requests = _requests(plan)
        pci_requests.instance_uuid = instance_uuid
        instances.append(({'uuid': instance_uuid}, pci_requests))
    claimed = []
    samples['claim'] = timing.batch(
        lambda item: claimed.extend(tracker.claim_instance(
            context, item[1], size.instance_topology)), instances)
    _check(len(claimed) == plan['claims'] and all(
        d.dev_type == 'type-VF' and d.vendor_id == '10de' and
        d.numa_node in plan['instance_cells'] for d in claimed),
        'each claim takes one vGPU slot (a type-VF) on the cell')
    samples['free'] = timing.batch(
        lambda item: tracker.free_instance(context, item[0]), instances)
    _check(all(d.status == 'available' for d in claimed),
           'every claimed device is free again')

    seconds, _ = timing.timed(
        tracker.update_devices_from_hypervisor_resources,
        size.payload_without)
    removed = [d.address for d in tracker.pci_devs
               if d.status == 'removed']
    _check(removed == [size.gone], 'the resync removes %s' % size.gone)
    samples['resync_removed'] = seconds
    return {'samples': samples, 'pools': len(pools)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--plan', required=True,
                        help='JSON: device_spec, alias, alias_name, '
                        'numa_nodes, instance_cells, policies, claims')
    parser.add_argument('--serve', action='store_true', required=True,
                        help='answer JSON requests on stdin (one a line)')
    args = parser.parse_args(argv)
    timing.quiet_eventlet()
    with open(args.plan) as f:
        plan = json.load(f)
    context = _setup(plan)
    import nova.version

    sizes = {}

    def tracker(request):
        path = request['devices']
        if path not in sizes:
            with open(path) as f:
                sizes[path] = Size(plan, json.load(f), request['remove'])
        return one_run(context, plan, sizes[path])

    def about(request):
        return {'nova_version': nova.version.version_string(),
                'python': sys.version.split()[0]}

    timing.serve({'tracker': tracker, 'about': about})
    return 0


if __name__ == '__main__':
    sys.exit(main())
