"""The Placement path on one host, without I/O: which slots serve it.

:func:`free_slots` orders a parent's free slots (existing mdevs first, then
by UUID) so that every caller takes the same ones; :func:`local_allocations`
plays Placement's allocation-candidates role when there is no Placement
service: it picks, per resource group and class, one child provider of the
host's provider tree with enough free slots; :func:`slots_for` maps an
allocation on a provider to slots of its mdev parents (one provider per
physical GPU: on an SR-IOV GPU the allocation may take slots of several
of its VF parents).

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


def provider_parents(tracker, prov):
    """The tracked mdev parents whose slots provider ``prov`` carries."""
    devices = tracker.devices
    return [devices[a] for a in prov.parent_addresses if a in devices]


def provider_free(tracker, prov):
    """How many slots provider ``prov`` can give now (:func:`free_count`
    over its parents); -1 when none of them is tracked."""
    parents = provider_parents(tracker, prov)
    if not parents:
        return -1
    return sum(free_count(tracker, p) for p in parents)


def provider_numa_node(tracker, prov):
    """The NUMA node of provider ``prov``'s device (the VF parents of an
    SR-IOV GPU sit on their PF's node), or None."""
    for parent in provider_parents(tracker, prov):
        return parent.numa_node
    return None


def _provider_label(prov, node):
    return '%s (%s, %s)' % (prov.name, prov.device_address,
                            'NUMA node %s' % node if node is not None
                            else 'no NUMA node')


def _shortfall(tree, devices, tracker, suffix, rc, amount, taken, cell_ids,
               barred):
    """RequestNotSatisfiable naming the group, and what is free where."""
    free = []
    total = 0
    for prov in tree.children:
        if rc not in prov.inventories:
            continue
        total += prov.inventories[rc].total
        count = max(0, provider_free(tracker, prov) - taken.get(prov.uuid, 0))
        note = ' (used by another group, group_policy=isolate)' if (
            prov.uuid in barred) else ''
        free.append('%s: %d%s' % (_provider_label(
            prov, provider_numa_node(tracker, prov)), count, note))
    where = ('; providers on NUMA node(s) %s are preferred' % ', '.join(
        str(c) for c in sorted(cell_ids))) if cell_ids else ''
    return exception.RequestNotSatisfiable(
        reason='resources%s:%s=%d: no provider of %s has %d free slot(s); '
               'free per provider: %s (%d in total on this host)%s' % (
                   suffix, rc, amount, rc, amount,
                   ', '.join(free) or 'none', total, where))


def placement_used(records):
    """``{(provider uuid, resource class): amount}`` held through the
    Placement path by the instance ``records`` (their ``allocations``)."""
    used = {}
    for rec in records:
        for prov, res in (rec.get('allocations') or {}).items():
            for rc, amount in res.items():
                used[(prov, rc)] = used.get((prov, rc), 0) + amount
    return used


def local_allocations(tree, tracker, resource_groups, numa_cells=None,
                      isolate=False):
    """Choose providers for ``resource_groups`` without a Placement service.

    Each (group, resource class) is served by one child provider with
    enough free slots, preferring providers on the instance's NUMA cells,
    then by name; with ``isolate`` (``group_policy=isolate``) two numbered
    groups never share a provider. Returns ``{provider uuid: {rc:
    amount}}`` or raises RequestNotSatisfiable naming the resource class
    and the free slots of every provider of it.
    """
    cell_ids = {c.id for c in numa_cells} if numa_cells else set()
    devices = tracker.devices
    taken = {}
    result = {}
    owner = {}          # provider uuid -> numbered group using it
    for suffix, group in sorted(resource_groups.items()):
        barred = {u for u, g in owner.items()
                  if isolate and suffix and g != suffix}
        for rc, amount in sorted(group.items()):
            candidates = []
            for prov in tree.children:
                if rc not in prov.inventories or prov.uuid in barred:
                    continue
                free = provider_free(tracker, prov)
                if free < 0:        # no parent of it is tracked
                    continue
                free -= taken.get(prov.uuid, 0)
                if free >= amount:
                    near = provider_numa_node(tracker, prov) in cell_ids
                    candidates.append((not near, prov.name, prov))
            if not candidates:
                raise _shortfall(tree, devices, tracker, suffix, rc, amount,
                                 taken, cell_ids, barred)
            prov = sorted(candidates, key=lambda c: c[:2])[0][2]
            taken[prov.uuid] = taken.get(prov.uuid, 0) + amount
            if suffix:
                owner.setdefault(prov.uuid, suffix)
            result.setdefault(prov.uuid, {})
            result[prov.uuid][rc] = result[prov.uuid].get(rc, 0) + amount
    return result


def only_parents(tree, tracker, keep):
    """``tree`` whose child providers carry only the mdev parents that
    ``keep(parent)`` accepts, without the providers left with none (the
    tree as it is when ``keep`` is None)."""
    if keep is None:
        return tree
    children = []
    for prov in tree.children:
        kept = tuple(p.address for p in provider_parents(tracker, prov)
                     if keep(p))
        if kept:
            children.append(dataclasses.replace(prov, parent_addresses=kept))
    return dataclasses.replace(tree, children=tuple(children))


def slots_for(tree, tracker, allocations, root_uuid):
    """``[(parent address, amount)]``: how many slots each parent gives to
    serve ``allocations`` (``{provider uuid: {rc: amount}}``), for
    :meth:`~.manager.PciDevTracker.claim_slots`. The amount of a provider
    is taken from its parents in order: those with a free existing mdev
    first, then by address, each giving what it has free (so an SR-IOV
    GPU's VF parents, one slot each, give one slot each). The root's
    resources (VCPU, MEMORY_MB...) are not ours; any other provider is
    refused (InvalidValue), as is a provider short of free slots, slots
    still to create included (RequestNotSatisfiable)."""
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
        amount = sum(resources.get(rc, 0) for rc in prov.inventories)
        parents = provider_parents(tracker, prov)
        free = {p.address: free_count(tracker, p) for p in parents}
        if sum(free.values()) < amount:
            raise exception.RequestNotSatisfiable(
                reason='provider %s (%s): %d free slot(s) of %s, %d '
                       'allocated by Placement' % (
                           prov.name, prov.device_address,
                           sum(free.values()), ', '.join(sorted(
                               {p.mdev_type for p in parents})) or '-',
                           amount))
        parents.sort(key=lambda p: (not _has_free_mdev(tracker, p),
                                    p.address))
        for parent in parents:
            if amount <= 0:
                break
            take = min(amount, free[parent.address])
            if take:
                wanted.append((parent.address, take))
                amount -= take
    return wanted


def _has_free_mdev(tracker, parent):
    """True when ``parent`` has a free slot whose mdev exists already."""
    slots = free_slots(tracker, parent)
    return bool(slots) and extra_info.is_true(slots[0].extra_info,
                                              extra_info.MDEV_EXISTS)
