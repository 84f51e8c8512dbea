"""PCI stats: the pools of one host, and requests fitted to them.

The scheduler sees pools and counts only (:meth:`PciDeviceStats.from_pools`);
the compute host's pools also hold the devices themselves, so that a claim
can name concrete devices. Pools, their keys and the plans that take from
them are :mod:`.pools`; the NUMA policies are :mod:`.numa_policy`.

Invariants:

* a device is known to at most one pool, under its key; a pool's ``count`` is
  the number of free devices it holds, plus the slots its parents can still
  create (:meth:`PciDeviceStats.set_creatable`, :mod:`.capacity`; cost per
  parent, never per slot), plus for pools built from counts only the
  ``spare`` count it was given;
* a pool holds only devices that were ``available`` when last added; devices
  in other statuses are remembered as *busy* (for :meth:`explain`), devices
  that are removed, deleted or not whitelisted are forgotten;
* a request served by slots still to create gets slot devices made at
  commit (``materialise``); a parent taken whole takes them out with its
  children;
* every operation costs O(1) per device touched plus O(pools) per request:
  devices sit in ordered dicts keyed by address, never scanned in a loop;
* a parent whose ``extra_info['whole']`` is ``false`` (virtual, or an
  NVIDIA vGPU PF) is in no pool at all (its slots are);
* ``support_requests`` and ``explain`` never change anything;
  ``take_requests`` (and ``consume_requests``, ``apply_requests``) change
  all or nothing and never change a device (the tracker claims it);
  :meth:`PciDeviceStats.explain` counts what a request lacks and leaves the
  wording to :mod:`.explain`.

Affine devices are always taken first, so with enough of them every policy
behaves like ``required``; within a pool existing mdevs go before slots
still to create, otherwise devices go in the order they were added.
"""

import collections
import operator

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device_pool
from nova_pci_mdev.pci import explain as explain_mod
from nova_pci_mdev.pci import numa_policy
from nova_pci_mdev.pci import planner
from nova_pci_mdev.pci import pools

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus
Policy = fields.PCINUMAAffinityPolicy
_NO_EXTRA = {}     # never written: a device without extra_info
#: What add_device reads of a device (one C call each): its status and
#: address; the fields of its pool key but the tags.
_HEAD = operator.attrgetter('status', 'address')
_KEY_FIELDS = operator.attrgetter('vendor_id', 'product_id', 'dev_type',
                                  'mdev_type', 'numa_node')


class PciDeviceStats(object):
    """Pools of one host (see the module docstring for the invariants).

    ``tags_of(dev)`` returns the device-spec tags of a device, or None when
    no device spec matches it (such a device is not pooled). Without it
    every device is pooled with no tags. ``materialise(parent, count)``
    returns ``count`` new slot devices of ``parent`` for the slots still
    to create that a claim takes (:meth:`set_creatable`).
    """

    def __init__(self, numa_topology=None, tags_of=None, materialise=None):
        self.numa_topology = numa_topology
        self._tags_of = tags_of or (lambda dev: {})
        self._materialise = materialise
        self._pools = {}        # key -> _Pool
        self._where = {}        # address -> (key, 'existing'|'other'|busy)
        self._creatable_key = {}    # parent address -> key of its slots
        self._order = pools.Ordered(self._pools)
        self._key = pools.Keys()

    @classmethod
    def from_pools(cls, pool_list, numa_topology=None):
        """Scheduler-side stats: pools with counts, without devices."""
        stats = cls(numa_topology)
        for key, count in pool_counts(pool_list).items():
            stats.add_spare(key, count)
        return stats

    def add_spare(self, key, count):
        """``count`` more devices of pool ``key`` known by number only
        (the scheduler's view: no device objects)."""
        self._pool(key).spare += count

    def _pool(self, key):
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = pools.Pool(key)
            self._order.changed()
        return pool

    def _pools_in_order(self):
        return self._order.all()

    # -- devices -----------------------------------------------------------

    def add_device(self, dev):
        """Pool ``dev`` if it is available, else remember it as busy.

        Idempotent: call it again whenever a device's status, NUMA node,
        tags or ``mdev_exists`` changed and it moves where it belongs. A
        removed/deleted or non-whitelisted device, or one that can never be
        handed out whole, is forgotten.
        """
        status, address = _HEAD(dev)
        tags = None if status in Status.GONE else self._tags_of(dev)
        if tags is None:
            self.remove_device(dev)
            return
        extra = dev.extra_info or _NO_EXTRA
        if extra.get(extra_info.WHOLE) == extra_info.FALSE:
            self._unpool(address)     # its slots to create stay
            return
        key = self._key.pooled(_KEY_FIELDS(dev), tags)
        if status != Status.AVAILABLE:
            place = pools.BUSY
        elif extra.get(extra_info.MDEV_EXISTS) == extra_info.TRUE:
            place = 'existing'
        else:
            place = 'other'
        old = self._where.get(address)
        if old is not None:
            if old[0] == key and old[1] == place and (
                    place == pools.BUSY or
                    getattr(self._pools[key], place).get(address) is dev):
                return
            self._detach(address, old)
        pool = self._pools.get(key) or self._pool(key)
        if place == pools.BUSY:
            pool.busy.add(address)
        else:
            getattr(pool, place)[address] = dev
        self._where[address] = pool.spots[place]
        if old is not None and old[0] != key:
            self._drop_if_empty(old[0])

    def remove_device(self, dev):
        """Forget ``dev`` (or an address); a no-op if it is not known."""
        address = getattr(dev, 'address', dev)
        self._unpool(address)
        self._drop_creatable(address)

    def _unpool(self, address):
        where = self._where.pop(address, None)
        if where is not None:
            self._detach(address, where)
            self._drop_if_empty(where[0])

    def set_creatable(self, parent, count, tags):
        """Count ``count`` slots ``parent`` can still create, in the pool
        of its slots (their device-spec ``tags``; None: not pooled).
        Idempotent, like :meth:`add_device`; a parent whose key is the
        same keeps its place among the pool's parents."""
        key = self._key(parent.vendor_id, parent.product_id,
                        DevType.MDEV_VF, parent.mdev_type,
                        parent.numa_node, tags) if (
                            count > 0 and tags is not None) else None
        old = self._creatable_key.get(parent.address)
        if key is not None and old == key:
            pool = self._pools[key]
            entry = pool.creatable[parent.address]
            pool.creatable_total += count - entry[1]
            entry[:] = [parent, count]
            return
        self._drop_creatable(parent.address)
        if key is not None:
            pool = self._pool(key)
            pool.creatable[parent.address] = [parent, count]
            pool.creatable_total += count
            self._creatable_key[parent.address] = key
        if old is not None and old in self._pools:
            self._drop_if_empty(old)

    def _drop_creatable(self, address):
        key = self._creatable_key.pop(address, None)
        if key is not None:
            pool = self._pools[key]
            pool.creatable_total -= pool.creatable.pop(address)[1]
        return key

    def _detach(self, address, where):
        key, place = where
        pool = self._pools[key]
        if place == pools.BUSY:
            pool.busy.discard(address)
        else:
            del getattr(pool, place)[address]

    def _drop_if_empty(self, key):
        pool = self._pools[key]
        if not (pool.count or pool.busy):
            del self._pools[key]
            self._order.changed()

    def _make_busy(self, address):
        key, place = self._where[address]
        if place != pools.BUSY:
            self._detach(address, (key, place))
            self._pools[key].busy.add(address)
            self._where[address] = self._pools[key].spots[pools.BUSY]

    def devices(self):
        """Every free device held, pool by pool."""
        return [dev for pool in self._pools_in_order()
                for dev in pool.free_devices()]

    def free_by_numa_node(self, requests=None):
        """numa_node -> free devices (matching any of ``requests``)."""
        counts = collections.Counter()
        for pool in self._pools_in_order():
            if requests is None or any(pool.serves(r)
                                       for r in requests):
                counts[pool.numa_node] += pool.count
        return dict(counts)

    def to_pool_list(self, include_empty=False):
        out = []
        for pool in self._pools_in_order():
            if pool.count or include_empty:
                key = pool.key
                all_tags = dict(key.tags, dev_type=key.dev_type)
                out.append(pci_device_pool.PciDevicePool(
                    vendor_id=key.vendor_id, product_id=key.product_id,
                    numa_node=key.numa_node, mdev_type=key.mdev_type,
                    tags=all_tags, count=pool.count))
        return pci_device_pool.PciDevicePoolList(objects=out)

    def counts(self):
        """``{pool key: count}`` of every pool, as :func:`pool_counts`
        reads them from :meth:`to_pool_list` (what a store records)."""
        return pool_counts(self.to_pool_list(include_empty=True))

    # -- the API -----------------------------------------------------------

    def _view(self):
        """What the planner reads of these pools."""
        return planner.View(self._order, self._where, self._pools,
                            self._creatable_key)

    def _plan(self, requests, numa_cells):
        return planner.plan(self._view(), requests, numa_policy.InstanceCells(
            self.numa_topology, numa_cells))

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

    def support_requests(self, requests, numa_cells=None):
        """Whether all ``requests`` fit together; changes nothing."""
        return self._plan(requests, numa_cells) is not None

    def apply_requests(self, requests, numa_cells=None):
        """Take the requests from the pools (counts) or raise, all or nothing.

        Raises PciDeviceRequestFailed with the :meth:`explain` lines.
        """
        self.consume_requests(requests, numa_cells)

    def consume_requests(self, requests, numa_cells=None):
        """The devices :meth:`take_requests` picks, request by request."""
        picks = self.take_requests(requests, numa_cells)
        return [dev for _request, dev in picks]

    def take_requests(self, requests, numa_cells=None):
        """Pick devices for all requests, all or nothing; returns
        ``[(request, device)]`` in request order.

        Picked devices and the relatives they make unusable (the parent of a
        picked child, the children of a picked parent) leave the pools (they
        are remembered as busy). The devices themselves are not changed:
        the tracker claims them and sets their ``request_id``. Raises
        PciDeviceRequestFailed naming every request that cannot be met;
        nothing changes then.
        """
        requests = list(requests)
        plan = self._plan(requests, numa_cells)
        if plan is None:
            raise exception.PciDeviceRequestFailed(
                reason='; '.join(self.explain(requests, numa_cells)))
        return self._commit(plan)

    def explain(self, requests, numa_cells=None):
        """One line per request that cannot be met (in order); changes nothing.

        Requests are taken in order, so a later request sees what the
        earlier ones took; a request that cannot be met takes nothing (the
        plan is made again from the requests met so far: this is the
        failure path, and a call has few requests).
        """
        numa = numa_policy.InstanceCells(self.numa_topology, numa_cells)
        plan = pools.Plan()
        met = []
        lines = []
        for index, request in enumerate(requests):
            got = planner.plan_request(self._view(), plan, request, numa)
            if got == request.count:
                met.append(request)
                continue
            plan = pools.Plan()
            for earlier in met:
                planner.plan_request(self._view(), plan, earlier, numa)
            lines.append(self._explain_one(plan, index, request, numa, got))
        return lines

    # -- explain -----------------------------------------------------------

    def _explain_one(self, plan, index, request, numa, got):
        policy = request.numa_policy or Policy.LEGACY
        short = plan.shortfall(self._pools_in_order(), request, numa, policy)
        short.together = got
        specs = [{k: v for k, v in spec.items() if k not in pools.IGNORED_KEYS}
                 for spec in request.spec]
        return explain_mod.shortfall_line(request, index, specs, numa,
                                          policy, short)


def pool_counts(pool_list):
    """``{pool key: count}`` of a pool list (PciDevicePool objects or
    Nova's flat dicts); a key listed twice counts the sum."""
    counts = {}
    for item in pool_list or ():
        flat = dict(item if isinstance(item, dict) else item.to_dict())
        count = int(flat.pop('count', 0) or 0)
        key = pools.PoolKey.of(
            flat.pop('vendor_id', None), flat.pop('product_id', None),
            flat.pop('dev_type', None), flat.pop('mdev_type', None),
            flat.pop('numa_node', None), flat)
        counts[key] = counts.get(key, 0) + count
    return counts


def adjusted(pool_list, before, after):
    """``pool_list`` plus what changed from the counts ``before`` to
    ``after`` (:meth:`PciDeviceStats.counts` of the same devices before
    and after a claim or a release): the pools of the whole host when
    ``pool_list`` was theirs and only these devices changed. A count
    that would drop below zero means ``pool_list`` was not theirs:
    ValueError."""
    counts = pool_counts(pool_list)
    for key in set(before) | set(after):
        counts[key] = counts.get(key, 0) + after.get(key, 0) - before.get(
            key, 0)
        if counts[key] < 0:
            raise ValueError('pool %s would count %d' % (key, counts[key]))
    stats = PciDeviceStats()
    for key, count in counts.items():
        stats.add_spare(key, count)
    return stats.to_pool_list()
