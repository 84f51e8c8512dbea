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
import itertools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import placement

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


def _shortfall(tree, devices, tracker, group, what, taken, cell_ids, barred,
               traits=None):
    """RequestNotSatisfiable for ``what`` (the ``group``'s resources, as
    the flavor writes them), naming what is free where on the providers of
    its resource classes and, per provider, the trait rule that rules it
    out."""
    free = []
    total = 0
    for prov in tree.children:
        if not set(group) & set(prov.inventories):
            continue
        total += sum(inv.total for inv in prov.inventories.values())
        count = max(0, provider_free(tracker, prov) - taken.get(prov.uuid, 0))
        note = ' (used by another group, group_policy=isolate)' if (
            prov.uuid in barred) else _trait_note(prov, traits)
        free.append('%s: %d%s' % (_provider_label(
            prov, provider_numa_node(tracker, prov)), count, note))
    where = ('; providers on NUMA node(s) %s are preferred' % ', '.join(
        str(c) for c in sorted(cell_ids))) if cell_ids else ''
    if len(group) == 1:
        (rc, amount), = group.items()
        head = 'no provider of %s has %d free slot(s)' % (rc, amount)
    else:
        head = 'no provider (one per resource class) has them free'
    if traits is not None and (traits.required or traits.forbidden):
        head += ' with the traits asked (%s)' % ', '.join(
            ['%s required' % t for t in sorted(traits.required)]
            + ['%s forbidden' % t for t in sorted(traits.forbidden)])
    return exception.RequestNotSatisfiable(
        reason='%s: %s; free per provider: %s (%d in total on this host)%s'
        % (what, head, ', '.join(free) or 'none', total, where))


def _trait_note(prov, traits):
    if traits is None:
        return ''
    lacks = sorted(traits.required - prov.traits)
    has = sorted(traits.forbidden & prov.traits)
    notes = (['lacks required trait %s' % t for t in lacks]
             + ['has forbidden trait %s' % t for t in has])
    return ' (%s)' % ', '.join(notes) if notes else ''


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
                      isolate=False, traits=None):
    """Choose providers for ``resource_groups`` without a Placement service,
    as an allocation candidate of Placement would.

    A numbered group is served by one child provider that has every
    resource of the group, its ``traits`` (``{suffix:
    flavor.Traits}``) required and none forbidden; the unnumbered group
    by one provider per resource class, none with a forbidden trait,
    together having every trait it requires (``traits`` values: objects
    with ``required`` and ``forbidden`` sets). Of the mdev type traits
    (``CUSTOM_MDEV_TYPE_*``, the only traits of these providers) the
    unnumbered group can only get those of its own providers: without
    resources of ours it gets none (in Nova its other providers are the
    compute node's). Other traits of the unnumbered group are the compute
    node's, which this tree does not model: not checked here. Providers
    on the instance's NUMA cells come first, then by name; with
    ``isolate`` (``group_policy=isolate``) two numbered groups never
    share a provider. Returns ``{provider uuid: {rc: amount}}`` or raises
    RequestNotSatisfiable naming the group, and the free slots and the
    trait rules of every provider.
    """
    traits = traits or {}
    unnumbered = traits.get('')
    ours = _ours(unnumbered.required) if unnumbered else []
    if '' not in resource_groups and ours:
        raise exception.RequestNotSatisfiable(
            reason='trait:%s=required: the unnumbered request group asks '
                   'no resources of this host\'s mdev providers, so no '
                   'provider of it can have the trait (put it on the '
                   'group of those resources: trait<N>:)' % ours[0])
    search = _Search(tree, tracker, numa_cells, isolate, traits,
                     sorted(resource_groups.items()))
    chosen = search.first(0, {}, {})
    if chosen is None:
        raise search.shortfall()
    result = {}
    for prov, rc, amount in chosen:
        result.setdefault(prov.uuid, {})
        result[prov.uuid][rc] = result[prov.uuid].get(rc, 0) + amount
    return result


def _ours(names):
    """The mdev type traits among ``names``, sorted."""
    return sorted(t for t in names if t.startswith(placement.TRAIT_PREFIX))


def _what(suffix, group):
    return ', '.join('resources%s:%s=%d' % (suffix, rc, n)
                     for rc, n in sorted(group.items()))


class _Search(object):
    """The first choice of providers, group after group, in preference
    order, that serves every group (depth first: a later group that finds
    no provider sends the search back to the next choice of an earlier
    one, as Placement finds every combination). A flavor asks few groups
    and a host has few providers per class: the search is their product
    at worst, and usually the first choice of each."""

    def __init__(self, tree, tracker, numa_cells, isolate, traits, groups):
        self.tree, self.tracker, self.isolate = tree, tracker, isolate
        self.devices = tracker.devices
        self.cell_ids = {c.id for c in numa_cells} if numa_cells else set()
        self.traits, self.groups = traits, groups
        self.deepest = None     # (index, taken, owner) of the last failure
        self.free = {}          # provider uuid -> free slots (free_count)

    def first(self, index, taken, owner):
        """``[(provider, rc, amount)]`` for groups ``index`` on, or None."""
        if index == len(self.groups):
            return []
        suffix, _group = self.groups[index]
        for choice in self._options(index, taken, owner):
            now_taken, now_owner = dict(taken), dict(owner)
            for prov, _rc, amount in choice:
                now_taken[prov.uuid] = now_taken.get(prov.uuid, 0) + amount
                if suffix:
                    now_owner.setdefault(prov.uuid, suffix)
            rest = self.first(index + 1, now_taken, now_owner)
            if rest is not None:
                return choice + rest
        if self.deepest is None or index >= self.deepest[0]:
            self.deepest = (index, taken, owner)
        return None

    def _rank(self, prov):
        near = provider_numa_node(self.tracker, prov) in self.cell_ids
        return (not near, prov.name)

    def _room(self, prov, taken, amount):
        free = self.free.get(prov.uuid)
        if free is None:        # once per provider: a count over its slots
            free = self.free[prov.uuid] = provider_free(self.tracker, prov)
        return free - taken.get(prov.uuid, 0) >= amount

    def _barred(self, suffix, owner):
        return {u for u, g in owner.items()
                if self.isolate and suffix and g != suffix}

    def _options(self, index, taken, owner):
        """The choices for group ``index``, best first: a numbered group
        has one provider with every resource of it, every required trait
        and no forbidden one; the unnumbered group one provider per
        resource class, none with a forbidden trait, together having
        every mdev type trait it requires."""
        suffix, group = self.groups[index]
        rule = self.traits.get(suffix)
        required = rule.required if rule else frozenset()
        forbidden = rule.forbidden if rule else frozenset()
        if suffix:
            barred = self._barred(suffix, owner)
            for prov in sorted(
                    (p for p in self.tree.children
                     if set(group) <= set(p.inventories)
                     and p.uuid not in barred and required <= p.traits
                     and not forbidden & p.traits
                     and self._room(p, taken, sum(group.values()))),
                    key=self._rank):
                yield [(prov, rc, n) for rc, n in sorted(group.items())]
            return
        per_rc = [[(prov, rc, n) for prov in sorted(
            (p for p in self.tree.children
             if rc in p.inventories and not forbidden & p.traits
             and self._room(p, taken, n)), key=self._rank)]
            for rc, n in sorted(group.items())]
        ours = set(_ours(required))
        for choice in itertools.product(*per_rc):
            have = set()
            for prov, _rc, _n in choice:
                have |= prov.traits
            if ours <= have:
                yield list(choice)

    def shortfall(self):
        """RequestNotSatisfiable for the group the search got stuck at."""
        index, taken, owner = self.deepest
        suffix, group = self.groups[index]
        error = _shortfall(self.tree, self.devices, self.tracker, group,
                           _what(suffix, group), taken, self.cell_ids,
                           self._barred(suffix, owner),
                           self.traits.get(suffix))
        if index:
            earlier = ', '.join(_what(s, g) for s, g in self.groups[:index])
            error = exception.RequestNotSatisfiable(
                reason='%s (after %s, every choice of providers tried)'
                % (error.kwargs['reason'], earlier))
        return error


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
