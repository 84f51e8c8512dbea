"""Pools: interchangeable free devices under one key, and the plans that
take from them (the parts of :mod:`.stats` that hold no host-wide state).

A :class:`Pool` gathers the free devices that agree on a :class:`PoolKey`
(vendor_id, product_id, dev_type, mdev_type, numa_node, device-spec tags):
existing mdevs first, then the other devices in the order they were added,
then the slots its parents can still create. :meth:`Pool.matches` decides
whether a request spec may use a pool: every key equal (ids and tags case
insensitive, ``mdev_type`` and ``numa_node`` exact), parent and ``vdpa``
pools only for specs naming their dev_type, ``remote_managed=true`` pools
only for specs asking for it. A :class:`Plan` records what one call would
take without touching any pool. Pure, no I/O.
"""

import itertools
import operator
import typing

from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import explain

DevType = fields.PciDeviceType

#: Pools of these dev_types serve only specs that name the dev_type.
EXPLICIT_DEV_TYPES = frozenset((DevType.SRIOV_PF, DevType.MDEV_PF,
                                DevType.VDPA))
#: Spec and tag keys that Placement matches; pools and matching ignore them.
IGNORED_KEYS = frozenset(('resource_class', 'traits', 'rp_uuids', 'rp_uuid'))
REMOTE_MANAGED = 'remote_managed'
#: Keys compared case-sensitively (sysfs names, numbers).
_EXACT_KEYS = frozenset(('mdev_type', 'numa_node'))
#: Where a busy device sits (remembered, not counted).
BUSY = 'busy'


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


class Keys(object):
    """:meth:`PoolKey.of`, remembered per distinct argument values (a
    host's devices share a handful of keys); ``tags`` is a dict."""

    def __init__(self):
        self._memo = {}

    def __call__(self, vendor_id, product_id, dev_type, mdev_type,
                 numa_node, tags):
        return self.pooled(
            (vendor_id, product_id, dev_type, mdev_type, numa_node), tags)

    def pooled(self, values, tags):
        """The same key from ``values``: (vendor_id, product_id, dev_type,
        mdev_type, numa_node), a tuple."""
        raw = values + (tuple(tags.items()),)
        try:
            return self._memo[raw]
        except KeyError:
            key = self._memo[raw] = PoolKey.of(*values, tags)
            return key
        except TypeError:       # an unhashable tag value
            return PoolKey.of(*values, tags)


def _norm(key, value):
    if value is None:
        return None
    value = str(value)
    return value if key in _EXACT_KEYS else value.lower()


def _truthy(value):
    return str(value).lower() in ('true', '1', 'yes', 'on')


class Pool(object):
    """Free devices of one key: ``existing`` mdevs first, then the rest,
    then slots still to create (``creatable``: parent address -> [parent,
    count], see :mod:`.capacity`)."""

    __slots__ = ('key', 'attrs', 'existing', 'other', 'busy', 'spare',
                 'creatable', 'creatable_total', 'spots')

    def __init__(self, key):
        self.key = key
        self.attrs = dict(key.tags)
        self.attrs.update(vendor_id=key.vendor_id, product_id=key.product_id,
                          dev_type=key.dev_type, mdev_type=key.mdev_type,
                          numa_node=key.numa_node)
        self.existing = {}
        self.other = {}
        self.busy = set()
        self.spare = 0
        self.creatable = {}
        self.creatable_total = 0
        #: place -> (key, place): where a device of this pool sits, one
        #: tuple per place shared by all its devices.
        self.spots = {place: (key, place)
                      for place in ('existing', 'other', BUSY)}

    dev_type = property(lambda self: self.key.dev_type)
    numa_node = property(lambda self: self.key.numa_node)

    @property
    def count(self):
        return (self.spare + len(self.existing) + len(self.other)
                + self.creatable_total)

    def free_devices(self):
        return itertools.chain(self.existing.values(), self.other.values())

    def serves(self, request):
        """Whether any spec of ``request`` may use this pool."""
        return any(self.matches(spec) for spec in request.spec)

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


def spec_key(specs):
    """A hashable form of a request's specs (a list of dicts): equal keys,
    equal answers of :meth:`Pool.serves`; None when a value is not
    hashable."""
    key = _spec_key(specs)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _spec_key(specs):
    """:func:`spec_key` without the check that it is hashable."""
    if len(specs) == 1:             # the usual request: no generator
        return (tuple(sorted(specs[0].items())),)
    return tuple(tuple(sorted(spec.items())) for spec in specs)


class Ordered(object):
    """The pools of one host (``pools``: key -> Pool, shared with its
    owner) in sort order, and per request spec the ones that serve it.

    Both are remembered until the owner calls :meth:`changed` (a pool was
    added or dropped). That is safe because a pool's key never changes and
    :meth:`Pool.serves` reads nothing but the key and the spec: the answer
    for (pool, spec) holds for the pool's whole life. At most
    :data:`SPECS_REMEMBERED` distinct specs are kept (then it starts over).
    """

    SPECS_REMEMBERED = 256

    def __init__(self, pools):
        self._pools = pools
        self._all = None
        self._serving = {}      # spec_key -> [pool] in sort order

    def changed(self):
        self._all = None
        self._serving.clear()

    def all(self):
        if self._all is None:
            self._all = sorted(self._pools.values(),
                               key=lambda pool: pool.key.sort_key())
        return self._all

    def serving(self, request):
        """The pools (in sort order) that may serve ``request``."""
        key = _spec_key(request.spec)
        try:
            found = self._serving.get(key)
        except TypeError:           # a value that is not hashable
            key = found = None
        if found is None:
            found = [pool for pool in self.all() if pool.serves(request)]
            if key is not None:
                if len(self._serving) >= self.SPECS_REMEMBERED:
                    self._serving.clear()
                self._serving[key] = found
        return found

    def ranked(self, plan, request, numa):
        """(rank, pool, free) of the pools that may serve ``request`` and
        still have ``free`` > 0 devices in ``plan``, best NUMA rank first
        (``numa``: a :class:`.numa_policy.InstanceCells`; sort order
        within a rank)."""
        policy = request.numa_policy or fields.PCINUMAAffinityPolicy.LEGACY
        ranked = []
        removed = plan.removed
        for pool in self.serving(request):
            key = pool.key
            rank = numa.rank(key.numa_node, policy)
            if rank is not None:
                free = pool.count - removed.get(key, 0)
                if free > 0:
                    ranked.append((rank, pool, free))
        if len(ranked) > 1:
            ranked.sort(key=_first)     # stable: sort order within a rank
        return ranked


_first = operator.itemgetter(0)


class NewSlot(object):
    """A slot still to create that a plan takes from ``parent``."""

    __slots__ = ('parent',)

    def __init__(self, parent):
        self.parent = parent


class Plan(object):
    """What one call would take; the pools stay untouched until commit.

    Counts are plain dicts (absent: 0), read with ``get``: a plan is made
    per request, and most stay small."""

    __slots__ = ('removed', 'blocked', 'spare', 'cursors', 'picks', 'new',
                 'whole', 'passed')

    def __init__(self):
        self.removed = {}       # pool key -> free ones gone
        self.blocked = set()    # addresses taken or blocked
        self.spare = {}         # pool key -> spare taken
        self.cursors = {}
        self.picks = []         # (request, device)
        self.new = {}           # parent address -> slots to create
        self.whole = set()      # parents taken whole
        self.passed = {}        # pool key -> {address: device passed over}

    def available(self, pool):
        return pool.count - self.removed.get(pool.key, 0)

    def shortfall(self, pools_in_order, request, numa, policy):
        """The :class:`.explain.Shortfall` of ``request`` after this plan:
        what the pools hold for it, by why it cannot have it."""
        short = explain.Shortfall()
        for pool in pools_in_order:
            if not pool.serves(request):
                if any(pool.matches(s, restricted=False)
                       for s in request.spec):
                    short.restricted[restricted_to(pool)] += (
                        self.available(pool))
                continue
            short.taken += self.removed.get(pool.key, 0)
            self.free_per_parent(pool, short.by_parent)
            if numa.rank(pool.numa_node, policy) is None:
                short.elsewhere[pool.numa_node] += self.available(pool)
            else:
                short.free += self.available(pool)
                short.busy += len(pool.busy)
        return short

    def free_per_parent(self, pool, counts):
        """Add the free children of ``pool`` (devices and slots still to
        create) that this plan left, per (parent, NUMA node)."""
        for dev in pool.free_devices():
            if dev.parent_addr and dev.address not in self.blocked:
                counts[(dev.parent_addr, pool.numa_node)] += 1
        for address, (_parent, count) in pool.creatable.items():
            if address not in self.whole:
                counts[(address, pool.numa_node)] += max(
                    0, count - self.new.get(address, 0))


def restricted_to(pool):
    """The ``(key, value)`` a request must name to use ``pool``."""
    if pool.dev_type in EXPLICIT_DEV_TYPES:
        return ('device_type', pool.dev_type)
    return (REMOTE_MANAGED, 'true')


def ancestors(dev):
    """Parent, grandparent... of a device (one level for objects that only
    have ``parent_device``)."""
    found = getattr(dev, 'ancestors', None)
    if found is not None:
        return found()
    return [dev.parent_device] if dev.parent_device is not None else []


def descendants(dev):
    """Children, grandchildren... of a device."""
    found = getattr(dev, 'descendants', None)
    if found is not None:
        return found()
    return list(dev.child_devices or ())
