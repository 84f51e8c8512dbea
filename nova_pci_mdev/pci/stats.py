"""PCI stats: pools of interchangeable free devices, and NUMA policies.

A pool gathers the free devices that agree on vendor_id, product_id,
dev_type, mdev_type, numa_node and device-spec tags (its *key*). The
scheduler sees pools and counts only; the compute host's pools also hold the
devices themselves, so that a claim can name concrete devices.

Invariants:

* a device is known to at most one pool, under its key; a pool's ``count`` is
  the number of free devices it holds (plus, for pools built from counts
  only, the ``spare`` count it was given);
* a pool holds only devices that were ``available`` when last added; devices
  in other statuses are remembered as *busy* (for :meth:`explain`), devices
  that are removed, deleted or not whitelisted are forgotten;
* a pool also counts the slots its parents can still create
  (:meth:`PciDeviceStats.set_creatable`, :mod:`.capacity`), after its
  devices; a request served by them gets slot devices made at commit
  (``materialise``), and a parent taken whole takes them out with its
  children. Their cost is per parent, never per slot;
* every operation costs O(1) per device touched plus O(pools) per request:
  devices sit in ordered dicts keyed by address, never scanned in a loop;
* parent pools (``type-PF``, ``mdev-pf``) and ``vdpa`` pools serve a request
  only when its spec names that dev_type; a pool tagged
  ``remote_managed=true`` only when the spec asks for it; a parent whose
  ``extra_info['whole']`` is ``false`` (virtual, or an NVIDIA vGPU PF) is in
  no pool at all (its slots are);
* ``support_requests`` and ``explain`` never change anything;
  ``consume_requests`` and ``apply_requests`` change all or nothing;
  :meth:`PciDeviceStats.explain` counts what a request lacks and leaves the
  wording to :mod:`.explain`.

NUMA policies (``hw:pci_numa_affinity_policy``, as Nova documents them;
``numa_cells`` None or empty means the instance has no NUMA topology and
nothing is filtered):

* ``required``: the device's node is one of the instance's cells;
* ``legacy`` (also when the request has no policy): as ``required``, but a
  device that reports no NUMA node is acceptable too;
* ``preferred``: any device, affine ones first;
* ``socket``: the device's node is on the socket of one of the instance's
  cells (devices without a node never qualify). If a host cell has no socket
  id the policy degrades to ``required``, which is what Nova ends up doing.

Affine devices are always taken first, so with enough of them every policy
behaves like ``required``. Within a pool, devices whose
``extra_info['mdev_exists'] == 'true'`` (mdevs already present) go before
those that would have to be created; otherwise devices go in the order they
were added.
"""

import collections
import itertools
import typing

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device_pool
from nova_pci_mdev.pci import explain as explain_mod

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus
Policy = fields.PCINUMAAffinityPolicy

#: Pools of these dev_types serve only specs that name the dev_type.
EXPLICIT_DEV_TYPES = frozenset((DevType.SRIOV_PF, DevType.MDEV_PF,
                                DevType.VDPA))
#: Spec and tag keys that Placement matches; pools and matching ignore them.
IGNORED_KEYS = frozenset(('resource_class', 'traits', 'rp_uuids', 'rp_uuid'))
REMOTE_MANAGED = 'remote_managed'
#: Keys compared case-sensitively (sysfs names, numbers).
_EXACT_KEYS = frozenset(('mdev_type', 'numa_node'))
_BUSY = 'busy'


class PoolKey(typing.NamedTuple):
    """What the devices of one pool agree on (see the module docstring);
    ``tags`` is a sorted tuple of (key, value) pairs."""

    vendor_id: str
    product_id: str
    dev_type: str | None
    mdev_type: str | None
    numa_node: int | None
    tags: tuple

    @classmethod
    def of(cls, vendor_id, product_id, dev_type, mdev_type, numa_node, tags):
        """The key, normalised: ids lower case, ignored tags dropped."""
        return cls((vendor_id or '').lower(), (product_id or '').lower(),
                   dev_type, mdev_type, numa_node,
                   tuple(sorted((k, v) for k, v in tags.items()
                                if k not in IGNORED_KEYS)))

    def sort_key(self):
        return (self.vendor_id, self.product_id, self.dev_type or '',
                self.mdev_type or '', self.numa_node is None,
                self.numa_node or 0,
                tuple((k, v or '') for k, v in self.tags))


def _norm(key, value):
    if value is None:
        return None
    value = str(value)
    return value if key in _EXACT_KEYS else value.lower()


def _truthy(value):
    return str(value).lower() in ('true', '1', 'yes', 'on')


def _cell_id(cell):
    return getattr(cell, 'id', cell)


class _Pool(object):
    """Free devices of one key: ``existing`` mdevs first, then the rest,
    then slots still to create (``creatable``: parent address -> [parent,
    count], see :mod:`.capacity`)."""

    __slots__ = ('key', 'attrs', 'existing', 'other', 'busy', 'spare',
                 'creatable', 'creatable_total')

    def __init__(self, key):
        self.key = key
        self.attrs = dict(key.tags)
        self.attrs.update(vendor_id=key.vendor_id, product_id=key.product_id,
                          dev_type=key.dev_type, mdev_type=key.mdev_type,
                          numa_node=key.numa_node)
        self.existing = collections.OrderedDict()
        self.other = collections.OrderedDict()
        self.busy = set()
        self.spare = 0
        self.creatable = collections.OrderedDict()
        self.creatable_total = 0

    dev_type = property(lambda self: self.key.dev_type)
    numa_node = property(lambda self: self.key.numa_node)

    @property
    def count(self):
        return (self.spare + len(self.existing) + len(self.other)
                + self.creatable_total)

    def free_devices(self):
        return itertools.chain(self.existing.values(), self.other.values())

    def matches(self, spec, restricted=True):
        """Every key of ``spec`` equals this pool's value.

        With ``restricted`` also apply the rules on parent, vdpa and
        remote-managed pools.
        """
        for key, value in spec.items():
            if key not in IGNORED_KEYS and (
                    _norm(key, self.attrs.get(key)) != _norm(key, value)):
                return False
        if restricted:
            if (self.dev_type in EXPLICIT_DEV_TYPES and
                    _norm('dev_type', spec.get('dev_type')) !=
                    _norm('dev_type', self.dev_type)):
                return False
            if (_truthy(self.attrs.get(REMOTE_MANAGED)) and
                    not _truthy(spec.get(REMOTE_MANAGED))):
                return False
        return True


class _NewSlot(object):
    """A slot still to create that a plan takes from ``parent``."""

    __slots__ = ('parent',)

    def __init__(self, parent):
        self.parent = parent


class _Numa(object):
    """The instance's cells as the policies see them."""

    def __init__(self, topology, numa_cells):
        self.cell_ids = (frozenset(_cell_id(c) for c in numa_cells)
                         if numa_cells else None)
        self.sockets = None
        self.socket_nodes = None
        cells = topology.cells if topology is not None else ()
        if (self.cell_ids is not None and cells and
                all(c.socket is not None for c in cells)):
            self.sockets = frozenset(c.socket for c in cells
                                     if c.id in self.cell_ids)
            self.socket_nodes = frozenset(c.id for c in cells
                                          if c.socket in self.sockets)

    def rank(self, numa_node, policy):
        """0 affine, 1 acceptable, 2 last resort, None not allowed."""
        if self.cell_ids is None or numa_node in self.cell_ids:
            return 0
        if policy == Policy.REQUIRED:
            return None
        if policy == Policy.SOCKET:
            ok = self.socket_nodes is not None and (
                numa_node in self.socket_nodes)
            return 1 if ok else None
        if numa_node is None:
            return 1
        return 2 if policy == Policy.PREFERRED else None


class _Plan(object):
    """What one call would take; the pools stay untouched until commit."""

    def __init__(self):
        self.removed = collections.Counter()   # pool key -> free ones gone
        self.blocked = set()                   # addresses taken or blocked
        self.spare = collections.Counter()     # pool key -> spare taken
        self.cursors = {}
        self.picks = []                        # (request, device)
        self.new = collections.Counter()       # parent -> slots to create
        self.whole = set()                     # parents taken whole

    def available(self, pool):
        return pool.count - self.removed[pool.key]


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
        self._ordered = None    # cached pools in sort order

    @classmethod
    def from_pools(cls, pool_list, numa_topology=None):
        """Scheduler-side stats: pools with counts, without devices."""
        stats = cls(numa_topology)
        for item in pool_list or ():
            flat = dict(item if isinstance(item, dict) else item.to_dict())
            count = int(flat.pop('count', 0) or 0)
            key = PoolKey.of(flat.pop('vendor_id', None),
                             flat.pop('product_id', None),
                             flat.pop('dev_type', None),
                             flat.pop('mdev_type', None),
                             flat.pop('numa_node', None), flat)
            stats._pool(key).spare += count
        return stats

    def _pool(self, key):
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(key)
            self._ordered = None
        return pool

    def _pools_in_order(self):
        if self._ordered is None:
            self._ordered = sorted(self._pools.values(),
                                   key=lambda pool: pool.key.sort_key())
        return self._ordered

    # -- devices -----------------------------------------------------------

    def add_device(self, dev):
        """Pool ``dev`` if it is available, else remember it as busy.

        Idempotent: call it again whenever a device's status, NUMA node,
        tags or ``mdev_exists`` changed and it moves where it belongs. A
        removed/deleted or non-whitelisted device, or one that can never be
        handed out whole, is forgotten.
        """
        tags = None if dev.status in Status.GONE else self._tags_of(dev)
        if tags is None:
            self.remove_device(dev)
            return
        if extra_info.is_false(dev.extra_info, extra_info.WHOLE):
            self._unpool(dev.address)     # its slots to create stay
            return
        key = PoolKey.of(dev.vendor_id, dev.product_id, dev.dev_type,
                         dev.mdev_type, dev.numa_node, dict(tags))
        if dev.status != Status.AVAILABLE:
            place = _BUSY
        elif extra_info.is_true(dev.extra_info, extra_info.MDEV_EXISTS):
            place = 'existing'
        else:
            place = 'other'
        old = self._where.get(dev.address)
        if old == (key, place) and (
                place == _BUSY or
                getattr(self._pools[key], place)[dev.address] is dev):
            return
        if old is not None:
            self._detach(dev.address, old)
        pool = self._pool(key)
        if place == _BUSY:
            pool.busy.add(dev.address)
        else:
            getattr(pool, place)[dev.address] = dev
        self._where[dev.address] = (key, place)
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
        Idempotent, like :meth:`add_device`."""
        old = self._drop_creatable(parent.address)
        if count > 0 and tags is not None:
            key = PoolKey.of(parent.vendor_id, parent.product_id,
                             DevType.MDEV_VF, parent.mdev_type,
                             parent.numa_node, dict(tags))
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
        if place == _BUSY:
            pool.busy.discard(address)
        else:
            del getattr(pool, place)[address]

    def _drop_if_empty(self, key):
        pool = self._pools[key]
        if not (pool.count or pool.busy):
            del self._pools[key]
            self._ordered = None

    def _make_busy(self, address):
        key, place = self._where[address]
        if place != _BUSY:
            self._detach(address, (key, place))
            self._pools[key].busy.add(address)
            self._where[address] = (key, _BUSY)

    def devices(self):
        """Every free device held, pool by pool."""
        return [dev for pool in self._pools_in_order()
                for dev in pool.free_devices()]

    def free_by_numa_node(self, requests=None):
        """numa_node -> free devices (matching any of ``requests``)."""
        counts = collections.Counter()
        for pool in self._pools_in_order():
            if requests is None or any(self._serves(pool, r)
                                       for r in requests):
                counts[pool.numa_node] += pool.count
        return dict(counts)

    def to_pool_list(self, include_empty=False):
        pools = []
        for pool in self._pools_in_order():
            if pool.count or include_empty:
                key = pool.key
                all_tags = dict(key.tags, dev_type=key.dev_type)
                pools.append(pci_device_pool.PciDevicePool(
                    vendor_id=key.vendor_id, product_id=key.product_id,
                    numa_node=key.numa_node, mdev_type=key.mdev_type,
                    tags=all_tags, count=pool.count))
        return pci_device_pool.PciDevicePoolList(objects=pools)

    # -- planning ------------------------------------------------------------

    @staticmethod
    def _serves(pool, request):
        return any(pool.matches(spec) for spec in request.spec)

    def _ranked(self, plan, request, numa):
        """(rank, pool) the request may use, best first."""
        policy = request.numa_policy or Policy.LEGACY
        ranked = []
        for pool in self._pools_in_order():
            if self._serves(pool, request) and plan.available(pool) > 0:
                rank = numa.rank(pool.numa_node, policy)
                if rank is not None:
                    ranked.append((rank, pool))
        ranked.sort(key=lambda item: item[0])
        return ranked

    def _plan_request(self, plan, request, numa):
        """Take ``request.count`` devices into ``plan``; False if it cannot.

        On False the plan is unchanged.
        """
        need = request.count
        ranked = self._ranked(plan, request, numa)
        if sum(plan.available(pool) for _, pool in ranked) < need:
            return False
        for _, pool in ranked:
            if need <= 0:
                break
            take = min(need, plan.available(pool))
            need -= take
            self._take(plan, request, pool, take)
        return True

    def _take(self, plan, request, pool, n):
        cursor = plan.cursors.get(pool.key)
        if cursor is None:
            cursor = plan.cursors[pool.key] = pool.free_devices()
        while n:
            dev = next(cursor, None)
            if dev is None:
                break
            if dev.address in plan.blocked:
                continue
            plan.picks.append((request, dev))
            self._block(plan, dev)
            n -= 1
        n = self._take_creatable(plan, request, pool, n)
        if n:
            plan.spare[pool.key] += n
            plan.removed[pool.key] += n

    def _take_creatable(self, plan, request, pool, n):
        """Take up to ``n`` slots still to create; return how many are
        still missing."""
        for address, (parent, count) in pool.creatable.items():
            if not n:
                break
            take = 0 if address in plan.whole else min(
                n, count - plan.new[address])
            if take <= 0:
                continue
            plan.new[address] += take
            plan.removed[pool.key] += take
            plan.picks.extend((request, _NewSlot(parent))
                              for _ in range(take))
            self._block_one(plan, parent)
            n -= take
        return n

    def _block(self, plan, dev):
        """Mark ``dev`` and the relatives it makes unusable as taken."""
        relatives = list(dev.child_devices or ())
        if dev.parent_device is not None:
            relatives.append(dev.parent_device)
        for each in [dev] + relatives:
            self._block_one(plan, each)
        key = self._creatable_key.get(dev.address)
        if key is not None and dev.address not in plan.whole:
            # A parent taken whole takes its slots still to create too.
            plan.whole.add(dev.address)
            count = self._pools[key].creatable[dev.address][1]
            plan.removed[key] += count - plan.new[dev.address]

    def _block_one(self, plan, dev):
        if dev.address in plan.blocked:
            return
        plan.blocked.add(dev.address)
        where = self._where.get(dev.address)
        if where is not None and where[1] != _BUSY:
            plan.removed[where[0]] += 1

    def _plan(self, requests, numa_cells):
        numa = _Numa(self.numa_topology, numa_cells)
        plan = _Plan()
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
        for address in plan.blocked:
            if address in self._where:
                self._make_busy(address)
        for key, n in plan.spare.items():
            self._pools[key].spare -= n
        picks = []
        for request, dev in plan.picks:
            if isinstance(dev, _NewSlot):
                dev = made[dev.parent.address].pop()
            picks.append((request, dev))
        return picks

    # -- the API -----------------------------------------------------------

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
        earlier ones took; a request that cannot be met takes nothing.
        """
        numa = _Numa(self.numa_topology, numa_cells)
        plan = _Plan()
        lines = []
        for index, request in enumerate(requests):
            if not self._plan_request(plan, request, numa):
                lines.append(self._explain_one(plan, index, request, numa))
        return lines

    # -- explain -----------------------------------------------------------

    @staticmethod
    def _free_per_parent(plan, pool, counts):
        """Add the free children of ``pool`` (devices and slots still to
        create) that ``plan`` left, per (parent, NUMA node)."""
        for dev in pool.free_devices():
            if dev.parent_addr and dev.address not in plan.blocked:
                counts[(dev.parent_addr, pool.numa_node)] += 1
        for address, (_parent, count) in pool.creatable.items():
            if address not in plan.whole:
                counts[(address, pool.numa_node)] += max(
                    0, count - plan.new[address])

    def _explain_one(self, plan, index, request, numa):
        policy = request.numa_policy or Policy.LEGACY
        short = explain_mod.Shortfall()
        for pool in self._pools_in_order():
            if not self._serves(pool, request):
                if any(pool.matches(s, restricted=False)
                       for s in request.spec):
                    short.restricted[_restricted_to(pool)] += (
                        plan.available(pool))
                continue
            short.taken += plan.removed[pool.key]
            self._free_per_parent(plan, pool, short.by_parent)
            if numa.rank(pool.numa_node, policy) is None:
                short.elsewhere[pool.numa_node] += plan.available(pool)
            else:
                short.free += plan.available(pool)
                short.busy += len(pool.busy)
        specs = [{k: v for k, v in spec.items() if k not in IGNORED_KEYS}
                 for spec in request.spec]
        return explain_mod.shortfall_line(request, index, specs, numa,
                                          policy, short)


def _restricted_to(pool):
    """The ``(key, value)`` a request must name to use ``pool``."""
    if pool.dev_type in EXPLICIT_DEV_TYPES:
        return ('device_type', pool.dev_type)
    return (REMOTE_MANAGED, 'true')
