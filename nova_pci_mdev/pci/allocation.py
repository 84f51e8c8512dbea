"""The Placement path on one host, without I/O: which slots serve it.

:func:`free_slots` orders a parent's free slots (existing mdevs first, then
by UUID) so that every caller takes the same ones; :func:`local_allocations`
plays Placement's allocation-candidates role when there is no Placement
service: it picks, per resource group and class, one child provider of the
host's provider tree with enough free slots.

Pure: it reads the tracker and the provider tree and changes neither.
"""

import dataclasses

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity

Status = fields.PciDeviceStatus


def free_slots(tracker, parent):
    """Available slots of ``parent``: existing mdevs first, then by UUID."""
    slots = [c for c in parent.child_devices
             if c.status == Status.AVAILABLE and
             c.mdev_type == parent.mdev_type]
    slots.sort(key=lambda s: (
        not extra_info.is_true(s.extra_info, extra_info.MDEV_EXISTS),
        s.address))
    return slots


def free_count(tracker, parent):
    """How many slots ``parent`` can give now: its free slots and,
    while it is not used whole, the slots it can still create."""
    return len(free_slots(tracker, parent)) + capacity.usable(parent)


def local_allocations(tree, tracker, resource_groups, numa_cells=None):
    """Choose providers for ``resource_groups`` without a Placement service.

    Each (group, resource class) is served by one child provider with
    enough free slots, preferring providers on the instance's NUMA cells,
    then by name; returns ``{provider uuid: {rc: amount}}`` or raises
    RequestNotSatisfiable naming the resource class.
    """
    cell_ids = {c.id for c in numa_cells} if numa_cells else set()
    devices = tracker.devices
    taken = {}
    result = {}
    for suffix, group in sorted(resource_groups.items()):
        for rc, amount in sorted(group.items()):
            candidates = []
            for prov in tree.children:
                if rc not in prov.inventories:
                    continue
                parent = devices.get(prov.device_address)
                if parent is None:
                    continue
                free = free_count(tracker, parent) - taken.get(prov.uuid, 0)
                if free >= amount:
                    near = parent.numa_node in cell_ids
                    candidates.append((not near, prov.name, prov))
            if not candidates:
                total = sum(p.inventories[rc].total for p in tree.children
                            if rc in p.inventories)
                raise exception.RequestNotSatisfiable(
                    reason='resources%s:%s=%d: no provider of %s has %d free '
                           'slot(s) (%d in total on this host)' % (
                               suffix, rc, amount, rc, amount, total))
            prov = sorted(candidates, key=lambda c: c[:2])[0][2]
            taken[prov.uuid] = taken.get(prov.uuid, 0) + amount
            result.setdefault(prov.uuid, {})
            result[prov.uuid][rc] = result[prov.uuid].get(rc, 0) + amount
    return result


def only_parents(tree, tracker, keep):
    """``tree`` without the child providers whose parent device
    ``keep(parent)`` rejects (all of them kept when ``keep`` is None)."""
    if keep is None:
        return tree
    devices = tracker.devices
    return dataclasses.replace(tree, children=tuple(
        p for p in tree.children
        if p.device_address in devices and keep(devices[p.device_address])))


def slots_for(tree, tracker, allocations, root_uuid):
    """``[(parent address, amount)]``: how many slots each parent gives to
    serve ``allocations`` (``{provider uuid: {rc: amount}}``), for
    :meth:`~.manager.PciDevTracker.claim_slots`. The root's resources
    (VCPU, MEMORY_MB...) are not ours; any other provider is refused
    (InvalidValue), as is a provider short of free slots, slots still to
    create included (RequestNotSatisfiable)."""
    by_uuid = {p.uuid: p for p in tree.children}
    wanted = []
    for prov_uuid, resources in sorted(allocations.items()):
        prov = by_uuid.get(prov_uuid)
        if prov is None:
            if prov_uuid == root_uuid:
                continue
            raise exception.InvalidValue(
                field='allocation provider', value=prov_uuid,
                rule='is not a provider of compute node %s' % tree.root.name)
        parent = tracker.devices[prov.device_address]
        amount = sum(resources.get(rc, 0) for rc in prov.inventories)
        free = free_count(tracker, parent)
        if free < amount:
            raise exception.RequestNotSatisfiable(
                reason='provider %s (%s): %d free slot(s) of %s, %d '
                       'allocated by Placement' % (
                           prov.name, parent.address, free,
                           parent.mdev_type, amount))
        wanted.append((parent.address, amount))
    return wanted
