"""Planning of :class:`.stats.PciDeviceStats` (a mixin): which devices,
and which slots still to create, a set of requests takes from the pools.

A :class:`.pools.Plan` records the picks without touching a pool; only
:meth:`Planner._commit` changes the pools (the picked devices and the
relatives they block leave them, remembered as busy; slots still to create
are made through ``materialise``). Cost: O(pools) per request plus O(1)
per device taken or blocked; the pools and the devices are read through
``self._order`` (:class:`.pools.Ordered`), ``self._where``,
``self._pools`` and ``self._creatable_key`` of the stats. Pure, no I/O.
"""

from nova_pci_mdev.pci import numa_policy
from nova_pci_mdev.pci import pools


class Planner(object):
    """Plans and commits of the pools' owner (see the module docstring)."""

    def _plan_request(self, plan, request, numa):
        """Take ``request.count`` devices into ``plan``; False if it cannot.

        On False the plan is unchanged.
        """
        need = request.count
        ranked = self._order.ranked(plan, request, numa)
        total = 0
        for item in ranked:
            total += item[2]
        if total < need:
            return False
        first = True
        for _, pool, free in ranked:
            if need <= 0:
                break
            # Free as ranked until a take: then a relative of the taken
            # devices may have left another pool of the request.
            take = min(need, free if first else plan.available(pool))
            first = False
            need -= take
            self._take(plan, request, pool, take)
        return True

    def _take(self, plan, request, pool, n):
        cursor = plan.cursors.get(pool.key)
        if cursor is None:
            cursor = plan.cursors[pool.key] = pool.free_devices()
        blocked = plan.blocked
        while n:
            dev = next(cursor, None)
            if dev is None:
                break
            if dev.address in blocked:
                continue
            plan.picks.append((request, dev))
            self._block(plan, dev)
            n -= 1
        if n:
            n = self._take_creatable(plan, request, pool, n)
        if n:
            key = pool.key
            plan.spare[key] = plan.spare.get(key, 0) + n
            plan.removed[key] = plan.removed.get(key, 0) + n

    def _take_creatable(self, plan, request, pool, n):
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
            self._block_all(plan, [parent] + pools.ancestors(parent))
            n -= take
        return n

    def _block(self, plan, dev):
        """Mark ``dev`` and the relatives it makes unusable (ancestors and
        descendants, to any depth) as taken."""
        below = pools.descendants(dev)
        self._block_all(plan, [dev] + pools.ancestors(dev) + below)
        creatable_key = self._creatable_key
        for each in [dev] + below if creatable_key else ():
            key = creatable_key.get(each.address)
            if key is not None and each.address not in plan.whole:
                # A parent taken whole (or below one taken whole) takes
                # its slots still to create too.
                plan.whole.add(each.address)
                count = self._pools[key].creatable[each.address][1]
                plan.removed[key] = plan.removed.get(key, 0) + (
                    count - plan.new.get(each.address, 0))

    def _block_all(self, plan, devs):
        """Mark each of ``devs`` taken (once) and count it out of the
        pool that holds it free."""
        blocked, removed, where = plan.blocked, plan.removed, self._where
        for dev in devs:
            address = dev.address
            if address in blocked:
                continue
            blocked.add(address)
            spot = where.get(address)
            if spot is not None and spot[1] != pools.BUSY:
                removed[spot[0]] = removed.get(spot[0], 0) + 1

    def _plan(self, requests, numa_cells):
        numa = numa_policy.InstanceCells(self.numa_topology, numa_cells)
        plan = pools.Plan()
        for request in requests:
            if not self._plan_request(plan, request, numa):
                return None
        return plan

    def _commit(self, plan):
        made = {}
        for address, count in plan.new.items():
            parent = self._pools[self._creatable_key[address]].creatable[
                address][0]
            # Reversed: pop() hands them out in sequence order.
            made[address] = list(self._materialise(parent, count))[::-1]
        where = self._where
        for address in plan.blocked:
            spot = where.get(address)
            if spot is not None and spot[1] != pools.BUSY:
                self._make_busy(address)
        for key, n in plan.spare.items():
            self._pools[key].spare -= n
        picks = []
        for request, dev in plan.picks:
            if isinstance(dev, pools.NewSlot):
                dev = made[dev.parent.address].pop()
            picks.append((request, dev))
        return picks
