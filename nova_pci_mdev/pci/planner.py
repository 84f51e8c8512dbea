"""Planning: which devices, and which slots still to create, a set of
requests takes from the pools. A pure function of the pools (a
:class:`View`), the requests and the instance's NUMA cells.

:func:`plan` records the picks in a :class:`.pools.Plan` without touching
a pool; the pools' owner (:meth:`.stats.PciDeviceStats.take_requests`)
commits it. A request gets all of its count or the plan fails: a device
taken blocks its relatives, so the free counts of the pools are only an
upper bound, and a parent is passed over while a candidate of the same
request is free below it. Cost: O(pools) per request plus O(1) per device
taken or blocked (a device passed over: O(devices below it), which taking
it would have cost too). Pure, no I/O; nothing of the view is changed.
"""

import typing

from nova_pci_mdev.pci import pools


class View(typing.NamedTuple):
    """What planning reads of the pools, never changes: ``order`` (a
    :class:`.pools.Ordered` of them), ``where`` (address -> (pool key,
    ``existing`` | ``other`` | busy)), ``pools`` (key -> :class:`.pools.
    Pool`) and ``creatable_key`` (parent address -> the key of the pool
    holding its slots still to create)."""

    order: object
    where: dict
    pools: dict
    creatable_key: dict


def plan(view, requests, numa):
    """A :class:`.pools.Plan` taking every request of ``requests`` (in
    order) from ``view`` for an instance on ``numa`` (a
    :class:`.numa_policy.InstanceCells`), or None when one cannot be met.
    """
    found = pools.Plan()
    for request in requests:
        if plan_request(view, found, request, numa) != request.count:
            return None
    return found


def plan_request(view, plan, request, numa):
    """Take ``request.count`` devices into ``plan``; return how many
    it took.

    Fewer than ``request.count``: the request cannot be met and the
    plan is spoiled (the caller throws it away). A device is taken only
    while no free device or slot still to create below it serves the
    same request (:func:`_below_serves`): a parent taken whole blocks
    its children, so taking the lowest candidates first takes as many
    as the request's relatives allow (in a forest the candidates with
    no candidate below them are the largest set of which none blocks
    another). The sum of the pools' free counts is an upper bound
    only: a device of one pool may block a device of another.
    """
    need = request.count
    ranked = view.order.ranked(plan, request, numa)
    total = 0
    for item in ranked:
        total += item[2]
    if total < need:
        return 0
    serving = None          # made once a pool holds devices
    for _, pool, _free in ranked:
        if serving is None and (pool.existing or pool.other):
            serving = {item[1].key for item in ranked}
        need = _take(view, plan, request, pool, need, serving)
        if not need:
            break
    return request.count - need


def _take(view, plan, request, pool, n, serving):
    """Take up to ``n`` of ``pool`` for ``request``; return how many
    are still missing. Devices passed over (a candidate below them:
    :func:`_below_serves`) wait in ``plan.passed`` for a later request
    of the call that may take them."""
    key = pool.key
    blocked = plan.blocked
    passed = plan.passed.get(key)
    if passed:
        for address, dev in list(passed.items()):
            if not n:
                return 0
            if address in blocked:
                del passed[address]
            elif not _below_serves(view, plan, dev, serving):
                del passed[address]
                plan.picks.append((request, dev))
                _block(view, plan, dev)
                n -= 1
    cursor = plan.cursors.get(key)
    if cursor is None:
        cursor = plan.cursors[key] = pool.free_devices()
    while n:
        dev = next(cursor, None)
        if dev is None:
            break
        if dev.address in blocked:
            continue
        if _below_serves(view, plan, dev, serving):
            plan.passed.setdefault(key, {})[dev.address] = dev
            continue
        plan.picks.append((request, dev))
        _block(view, plan, dev)
        n -= 1
    if n:
        n = _take_creatable(view, plan, request, pool, n)
    if n and pool.spare:
        # Pools built from counts only (the scheduler's view).
        take = min(n, pool.spare - plan.spare.get(key, 0))
        if take > 0:
            plan.spare[key] = plan.spare.get(key, 0) + take
            plan.removed[key] = plan.removed.get(key, 0) + take
            n -= take
    return n


def _below_serves(view, plan, dev, serving):
    """Whether a device or a slot still to create below ``dev`` (or a
    slot ``dev`` can still create) is free in ``plan`` and in a pool
    of ``serving``: then taking ``dev`` would block a candidate of the
    same request. O(1) for a device without children."""
    creatable_key = view.creatable_key
    if not dev.child_devices:
        return (creatable_key.get(dev.address) in serving
                and _creatable_left(view, plan, dev.address) > 0)
    if (creatable_key.get(dev.address) in serving
            and _creatable_left(view, plan, dev.address) > 0):
        return True
    blocked, where = plan.blocked, view.where
    for each in pools.descendants(dev):
        address = each.address
        if address in blocked:
            continue
        spot = where.get(address)
        if (spot is not None and spot[1] != pools.BUSY
                and spot[0] in serving):
            return True
        if (creatable_key.get(address) in serving
                and _creatable_left(view, plan, address) > 0):
            return True
    return False


def _creatable_left(view, plan, address):
    """Slots ``address`` can still create in ``plan``."""
    if address in plan.whole:
        return 0
    key = view.creatable_key[address]
    return (view.pools[key].creatable[address][1]
            - plan.new.get(address, 0))


def _take_creatable(view, plan, request, pool, n):
    """Take up to ``n`` slots still to create; return how many are
    still missing."""
    new, removed, key = plan.new, plan.removed, pool.key
    for address, (parent, count) in pool.creatable.items():
        if not n:
            break
        take = 0 if address in plan.whole else min(
            n, count - new.get(address, 0))
        if take <= 0:
            continue
        new[address] = new.get(address, 0) + take
        removed[key] = removed.get(key, 0) + take
        plan.picks.extend((request, pools.NewSlot(parent))
                          for _ in range(take))
        _block_all(view, plan, [parent] + pools.ancestors(parent))
        n -= take
    return n


def _block(view, plan, dev):
    """Mark ``dev`` and the relatives it makes unusable (ancestors and
    descendants, to any depth) as taken."""
    below = pools.descendants(dev)
    _block_all(view, plan, [dev] + pools.ancestors(dev) + below)
    creatable_key = view.creatable_key
    for each in [dev] + below if creatable_key else ():
        key = creatable_key.get(each.address)
        if key is not None and each.address not in plan.whole:
            # A parent taken whole (or below one taken whole) takes
            # its slots still to create too.
            plan.whole.add(each.address)
            count = view.pools[key].creatable[each.address][1]
            plan.removed[key] = plan.removed.get(key, 0) + (
                count - plan.new.get(each.address, 0))


def _block_all(view, plan, devs):
    """Mark each of ``devs`` taken (once) and count it out of the
    pool that holds it free."""
    blocked, removed, where = plan.blocked, plan.removed, view.where
    for dev in devs:
        address = dev.address
        if address in blocked:
            continue
        blocked.add(address)
        spot = where.get(address)
        if spot is not None and spot[1] != pools.BUSY:
            removed[spot[0]] = removed.get(spot[0], 0) + 1
