"""Whole-cloud invariants, checked on every host after each step.

:func:`problems` returns one line per broken invariant (empty when all
hold); :func:`verify` raises ``AssertionError`` with all of them. For every
compute host that is up:

1. **owners**: the tracker's busy devices, per consumer, are exactly the
   ones the cloud handed out (``cloud.held``); every busy device is
   ``allocated`` (no claim left half done);
2. **relatives**: every free device has the status its relatives imply
   (a parent with an allocated child, or a child of an allocated parent,
   is ``unavailable``; otherwise ``available``);
3. **kernel**: every held NVIDIA vGPU VF holds its type in sysfs and no
   free one holds any; every held mdev slot exists on the host with its parent and
   type; every slot the tracker says exists does; the fake libvirt reports
   exactly the kernel's mdevs (the udev relay); a parent has exactly as
   many slots of its type, tracked or still to create, as the kernel has
   instances of it (existing + available; fake hosts, types without
   ``max_instances``);
4. **store**: every consumer holding devices has its instance record
   listing exactly those devices; no record outlives its consumer;
5. **domains**: the guests defined on the host are the cloud's, with the
   hostdevs of their claim;
6. **Placement** (when the cloud has one): each child provider's
   inventory equals the host's tree, its usage equals the slots of that
   parent held through the Placement path, and ``total - reserved - used``
   equals the parent's free slots: nothing is double-booked across the
   tracker and Placement.

Across the hosts that are up (:func:`cross_host_problems`; once 1. holds
on every host, ``cloud.held`` is what the trackers hold):

7. **one holder**: no mdev slot UUID is held on two hosts, and a consumer
   (instance or migration) holds devices on one host at most;
8. **moves**: an instance's devices are held on its host, and while it
   moves also under the migration's UUID on the destination, nowhere else.
"""

from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.functional import harness

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus
CHILDREN = (DevType.SRIOV_VF, DevType.MDEV_VF)


def _expected_free_status(dev, devices, children):
    """What a free device's status must be: ``unavailable`` while a device
    above it (its parent; on an SR-IOV GPU the PF above its VF parent) or
    below it (its children and theirs) is allocated; three levels deep."""
    parent = devices.get(dev.parent_addr) if dev.parent_addr else None
    while parent is not None:
        if parent.status == Status.ALLOCATED:
            return Status.UNAVAILABLE
        parent = (devices.get(parent.parent_addr) if parent.parent_addr
                  else None)
    below = list(children.get(dev.address, ()))
    while below:
        child = below.pop()
        if child.status == Status.ALLOCATED:
            return Status.UNAVAILABLE
        below.extend(children.get(child.address, ()))
    return Status.AVAILABLE


def host_problems(cloud, sim):
    out = []
    name = sim.name
    snap = sim.compute.snapshot()
    devices = {d.address: d for d in snap.devices}
    children = {}
    for dev in devices.values():
        if dev.parent_addr and (dev.dev_type in CHILDREN
                                or dev.dev_type == DevType.MDEV_PF):
            children.setdefault(dev.parent_addr, []).append(dev)

    held = {}
    for dev in devices.values():
        if dev.status in harness.BUSY:
            held.setdefault(dev.instance_uuid, set()).add(dev.address)
            if dev.status != Status.ALLOCATED:
                out.append('%s: %s is %s for %s (claim not completed)' % (
                    name, dev.address, dev.status, dev.instance_uuid))
        else:
            want = _expected_free_status(dev, devices, children)
            if dev.status != want:
                out.append('%s: free device %s is %s, expected %s' % (
                    name, dev.address, dev.status, want))
    expected = {c: set(a) for c, a in cloud.held[name].items() if a}
    if held != expected:
        out.append('%s: tracker holds %s, the cloud handed out %s' % (
            name, _show(held), _show(expected)))

    kernel = sim.kernel_mdevs()
    for dev in devices.values():
        if dev.dev_type != DevType.MDEV_VF:
            continue
        have = kernel.get(dev.address)
        if dev.status in harness.BUSY or dev.extra_info.get(
                'mdev_exists') == 'true':
            if have != (dev.parent_addr, dev.mdev_type):
                out.append('%s: slot %s (%s, %s of %s) has mdev %s in the '
                           'kernel' % (name, dev.address, dev.status,
                                       dev.mdev_type, dev.parent_addr, have))
    out.extend(_vgpu_problems(sim, devices))
    if sim.udev is not None:
        if harness.fake_mdevs(sim.fake) != kernel:
            out.append('%s: libvirt reports mdevs %s, the kernel has %s' % (
                name, sorted(harness.fake_mdevs(sim.fake)), sorted(kernel)))
        out.extend(_capacity_problems(sim, devices, children))

    for consumer, addresses in expected.items():
        record = snap.instances.get(consumer)
        if record is None or set(record.get('devices') or ()) != addresses:
            out.append('%s: store record of %s is %s, expected devices %s'
                       % (name, consumer, record, sorted(addresses)))
    for consumer in snap.instances:
        if consumer not in cloud.held[name]:
            out.append('%s: store keeps a record of %s, which holds nothing '
                       'here' % (name, consumer))

    if sim.keeps_domains:
        defined = sim.domains()
        wanted = {cloud.instances[u].name if u in cloud.instances
                  else 'instance-%s' % u: g
                  for u, g in cloud.domains[name].items()}
        if sorted(defined) != sorted(wanted):
            out.append('%s: domains %s defined, expected %s' % (
                name, sorted(defined), sorted(wanted)))
        for dom_name, guest in wanted.items():
            if dom_name in defined and (
                    defined[dom_name].hostdevs != guest.hostdevs):
                out.append('%s: domain %s has hostdevs %s, expected %s' % (
                    name, dom_name, defined[dom_name].hostdevs,
                    guest.hostdevs))

    if cloud.client is not None:
        out.extend(_placement_problems(cloud, name, snap, devices, children))
    return out


def _vgpu_problems(sim, devices):
    """NVIDIA vGPU VFs: the driver holds a type on exactly the VFs held by
    a consumer, the type of their slot (nothing else sets one here)."""
    want = {d.address: int(d.mdev_type.split('-')[1])
            for d in devices.values()
            if d.status in harness.BUSY and d.dev_type == DevType.SRIOV_VF
            and d.extra_info.get('vgpu_framework')}
    have = sim.vgpu_types()
    if want != have:
        return ['%s: the NVIDIA driver holds vGPU types %s, the tracker\'s '
                'held VFs want %s' % (sim.name, have, want)]
    return []


def _capacity_problems(sim, devices, children):
    """Slots of a parent's exposed type == the instances it has in all."""
    out = []
    parents = harness.mdev_parents(sim.fake)
    for address, (_virtual, totals) in parents.items():
        parent = devices.get(address)
        if parent is None or parent.dev_type != DevType.MDEV_PF or (
                parent.mdev_type not in totals):
            continue
        options = sim.settings.mdev_types.get(parent.mdev_type)
        if options is not None and options.max_instances is not None:
            continue
        slots = [c.address for c in children.get(address, ())
                 if c.mdev_type == parent.mdev_type]
        offered = len(slots) + capacity.creatable(parent)
        if offered != totals[parent.mdev_type]:
            out.append('%s: parent %s offers %d %s slot(s), the kernel has '
                       '%d instance(s) of it in all' % (
                           sim.name, address, offered, parent.mdev_type,
                           totals[parent.mdev_type]))
    return out


def _placement_problems(cloud, name, snap, devices, children):
    out = []
    client = cloud.client
    placement_held = {c for c, r in snap.instances.items()
                      if r.get('allocations')}
    for prov in snap.tree.children:
        _generation, inventories = client.inventories(prov.uuid)
        usages = client.usages(prov.uuid)
        parents = [devices[a] for a in prov.parent_addresses]
        slots = [c for parent in parents
                 for c in children.get(parent.address, ())
                 if c.mdev_type == parent.mdev_type]
        for rc, inv in prov.inventories.items():
            have = inventories.get(rc) or {}
            if (have.get('total'), have.get('reserved')) != (
                    inv.total, inv.reserved):
                out.append('%s: Placement has %s %s, the host reports '
                           'total %d reserved %d' % (
                               prov.name, rc, have, inv.total,
                               inv.reserved))
            used = usages.get(rc, 0)
            by_placement = sum(1 for s in slots if s.status in harness.BUSY
                               and s.instance_uuid in placement_held)
            if used != by_placement:
                out.append('%s: Placement counts %d %s used, the tracker '
                           'holds %d slot(s) for Placement consumers' % (
                               prov.name, used, rc, by_placement))
            free = sum(1 for s in slots if s.status == Status.AVAILABLE
                       ) + sum(capacity.usable(p) for p in parents)
            if inv.total - inv.reserved - used != free:
                out.append('%s: Placement offers %d %s, the tracker has %d '
                           'free slot(s)' % (prov.name, inv.total -
                                             inv.reserved - used, rc, free))
    return out


def _show(held):
    return {c: sorted(a) for c, a in sorted(held.items())}


def cross_host_problems(cloud):
    out = []
    up = [name for name, sim in sorted(cloud.hosts.items()) if sim.up]
    where = {}
    slots = {}
    for name in up:
        for consumer, addresses in cloud.held[name].items():
            if addresses:
                where.setdefault(consumer, []).append(name)
            for address in addresses:
                if not names.is_pci_address(address):
                    slots.setdefault(address, []).append((name, consumer))
    for slot, holders in sorted(slots.items()):
        if len(holders) > 1:
            out.append('mdev slot %s is held on several hosts: %s'
                       % (slot, holders))
    for consumer, hosts in sorted(where.items()):
        if len(hosts) > 1:
            out.append('%s holds devices on several hosts: %s'
                       % (consumer, hosts))
    for inst in cloud.instances.values():
        allowed = {(inst.host, inst.uuid)}
        if inst.migration is not None:
            allowed.add((inst.migration.dest, inst.migration.uuid))
        for consumer in [c for c in (inst.uuid, getattr(
                inst.migration, 'uuid', None)) if c in where]:
            for name in where[consumer]:
                if (name, consumer) not in allowed:
                    out.append('%s of instance %s holds devices on %s, '
                               'expected only %s' % (
                                   consumer, inst.uuid, name,
                                   sorted(allowed)))
    return out


def problems(cloud):
    out = []
    for name, sim in sorted(cloud.hosts.items()):
        if sim.up:
            out.extend(host_problems(cloud, sim))
    return out + cross_host_problems(cloud)


def verify(cloud):
    found = problems(cloud)
    if found:
        raise AssertionError('cloud invariants broken:\n  ' +
                             '\n  '.join(found))
