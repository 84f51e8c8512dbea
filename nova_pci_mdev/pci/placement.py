"""The Placement provider tree of one compute host, computed from its devices.

Pure logic: no I/O, no configuration lookups; the caller passes the
tracker's devices and the set of instances that hold slots through the
Placement path. In a deployment Nova's report client pushes the result to
Placement (the driver's ``update_provider_tree``, see ``patches/``); the
tests push it to a real Placement with
``nova_pci_mdev.tests.fixtures.placement_client``.

Shape of the tree (DESIGN section 4, Placement path): one child provider
per *physical GPU* (or other physical mdev-capable device)::

    <nodename>                      root: the compute node (uuid given)
      |                             optional caller inventory (VCPU, ...)
      +-- <nodename>_pci_0000_84_00_0   {VGPU: total, reserved}
      |     a GPU that is its own       trait CUSTOM_MDEV_TYPE_NVIDIA_222
      |     mdev parent (T4)
      +-- <nodename>_pci_0000_41_00_0   {VGPU: 16, reserved}
      |     SR-IOV GPU (A100): PF       trait CUSTOM_MDEV_TYPE_NVIDIA_699
      |     0000:41:00.0 whose 16 VFs
      |     0000:41:00.4 .. 0000:41:02.3 are the mdev parents (one
      |     slot each); the PF itself is no provider of its own
      +-- <nodename>_pci_0000_85_00_0   {CUSTOM_MLX5: total, reserved}
                                        trait CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL

Per physical GPU, as the Nova series reports them (``patches/README.md``):
it is the physical resource, it is how Nova groups a PF's VFs, and it
scales (8 SR-IOV GPUs of 16 VFs: 8 providers, not 128; ``vGPU:8`` on ten
such hosts: 177 ms of Placement CPU per GPU, 362 ms per parent, with the
wide-tree settings, ``benchmarks/RESULTS.md``).

Invariants:

* One child per physical device that has a present mdev parent exposing
  a type (``mdev_type`` set): an ``mdev-pf`` that is a VF (its
  ``parent_addr`` is its PF: the mdev-capable VFs of an SR-IOV GPU, three
  levels) counts under its PF's address, whether or not the PF itself is
  tracked; any other ``mdev-pf`` (a GPU without SR-IOV, an mlx5 function,
  the virtual ``mtty``) and a ``type-PF`` that exposes a type (an NVIDIA GPU
  whose vGPUs are its VFs, the slots being its ``type-VF`` children of
  that type) count under their own address. Parents without an exposed
  type, removed parents and every other device type yield no provider.
* The mdev parents of one physical device expose one mdev type and one
  resource class; otherwise building the tree raises InvalidValue naming
  the device, the types and the parents (the operator maps them to one
  type). ``Provider.parent_addresses`` lists them (sorted),
  ``Provider.device_address`` is the physical device's address.
* A child's name is ``<nodename>_<dev_id>`` (the physical device's libvirt
  node device name, ``pci_0000_41_00_0``, or a virtual parent's name) and
  its uuid a uuid5 of that name: stable across restarts, unique across
  hosts; an SR-IOV GPU's provider is named after its PF.
* ``total`` counts, over the provider's parents, their present ``mdev-vf``
  slots of the exposed type (``removed``/``deleted`` slots and slots of
  another type, left over from an earlier configuration, are not counted)
  plus the slots they can still create (:mod:`.capacity`), at most
  Placement's 2**31 - 1. A child with no slot has no inventory (Placement
  refuses ``total: 0``).
* ``reserved`` counts the slots Placement must not hand out: slots
  claimed or allocated by an instance that is not in ``placement_held``
  (the alias path), slots made unusable because their parent, or the PF
  above it, is used whole (a PF used whole reserves every slot of its
  provider). Slots held by instances in ``placement_held`` are not
  reserved: Placement already counts them as used through their
  allocations. So ``total - reserved - used`` is exactly the number of
  free slots the tracker would hand out on the provider's parents.
* Building the tree is linear in the number of devices.
"""

import dataclasses
import re
import uuid as uuid_lib

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus

#: Namespace of the uuid5 of child provider names (fixed forever: changing
#: it would orphan every provider already registered in Placement).
PROVIDER_NAMESPACE = uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS,
                                    'providers.placement.nova-pci-mdev')
TRAIT_PREFIX = 'CUSTOM_MDEV_TYPE_'
DEFAULT_RESOURCE_CLASS = 'VGPU'
#: Placement's limits and name rules.
MAX_PROVIDER_NAME_LEN = 200
MAX_NAME_LEN = 255
MAX_INT = 2147483647
CUSTOM_NAME_RE = re.compile(r'^CUSTOM_[A-Z0-9_]+$')
STANDARD_NAME_RE = re.compile(r'^[A-Z][A-Z0-9_]*$')
_NON_ALNUM = re.compile(r'[^A-Za-z0-9]')
_BLOCKED_BY_PARENT = (Status.UNCLAIMABLE, Status.UNAVAILABLE)


def _invalid(field, value, rule):
    return exception.InvalidValue(field=field, value=value, rule=rule)


def resource_class_trait_name(mdev_type):
    """The trait of an mdev type: nvidia-35 -> CUSTOM_MDEV_TYPE_NVIDIA_35.

    Upper-cased, every character that is not a letter or digit becomes
    ``_``. Raises InvalidValue for an empty or over-long result.
    """
    if not isinstance(mdev_type, str) or not mdev_type:
        raise _invalid('mdev type', mdev_type, 'expected a non-empty string')
    name = TRAIT_PREFIX + _NON_ALNUM.sub('_', mdev_type).upper()
    if len(name) > MAX_NAME_LEN:
        raise _invalid('mdev type', mdev_type,
                       'its trait name %s is longer than %d characters'
                       % (name, MAX_NAME_LEN))
    return name


def validate_resource_class(value, field='resource class'):
    """Return ``value`` if it is ``VGPU``-like or ``CUSTOM_[A-Z0-9_]+``."""
    if (not isinstance(value, str) or len(value) > MAX_NAME_LEN
            or not (CUSTOM_NAME_RE if value.startswith('CUSTOM_')
                    else STANDARD_NAME_RE).match(value)):
        raise _invalid(field, value,
                       'expected a standard resource class such as VGPU or '
                       'CUSTOM_ followed by A-Z, 0-9 and "_" (at most %d '
                       'characters)' % MAX_NAME_LEN)
    return value


def provider_name(nodename, dev_id):
    """``<nodename>_<dev_id>``: the name of a parent device's provider."""
    name = '%s_%s' % (nodename, dev_id)
    if len(name) > MAX_PROVIDER_NAME_LEN:
        raise _invalid('provider name', name,
                       'Placement accepts at most %d characters'
                       % MAX_PROVIDER_NAME_LEN)
    return name


#: Namespace of the root provider's uuid5 of the compute node name (fixed
#: forever, like PROVIDER_NAMESPACE).
ROOT_NAMESPACE = uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS,
                                'compute-nodes.nova-pci-mdev')


def root_provider_uuid(nodename):
    """The compute node's root provider uuid: a uuid5 of its name."""
    return str(uuid_lib.uuid5(ROOT_NAMESPACE, nodename))


def provider_uuid(name):
    """The stable uuid of the provider called ``name``."""
    return str(uuid_lib.uuid5(PROVIDER_NAMESPACE, name))


@dataclasses.dataclass(frozen=True)
class Inventory:
    """One resource class of a provider, as Placement stores it.

    ``max_unit`` defaults to ``total``. Invariant: 0 <= reserved <= total,
    1 <= min_unit <= max_unit, step_size >= 1, allocation_ratio > 0.
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = None
    step_size: int = 1
    allocation_ratio: float = 1.0

    def __post_init__(self):
        for name in ('total', 'reserved', 'min_unit', 'max_unit',
                     'step_size'):
            value = getattr(self, name)
            if name == 'max_unit' and value is None:
                value = max(self.total, 1)
                object.__setattr__(self, name, value)
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not 0 <= value <= MAX_INT):
                raise _invalid('inventory %s' % name, value,
                               'expected an integer in 0..%d' % MAX_INT)
        if self.reserved > self.total:
            raise _invalid('inventory reserved', self.reserved,
                           'must not exceed total %d' % self.total)
        if not 1 <= self.min_unit <= self.max_unit:
            raise _invalid('inventory min_unit', self.min_unit,
                           'must be in 1..max_unit (%d)' % self.max_unit)
        if self.step_size < 1:
            raise _invalid('inventory step_size', self.step_size,
                           'must be at least 1')
        if not self.allocation_ratio > 0:
            raise _invalid('inventory allocation_ratio',
                           self.allocation_ratio, 'must be positive')

    def to_dict(self):
        """The inventory body of Placement's API for this resource class."""
        return {'total': self.total, 'reserved': self.reserved,
                'min_unit': self.min_unit, 'max_unit': self.max_unit,
                'step_size': self.step_size,
                'allocation_ratio': float(self.allocation_ratio)}


@dataclasses.dataclass(frozen=True)
class Provider:
    """A resource provider: identity, inventories and traits.

    ``device_address`` is the address of the physical device a child
    provider stands for (None for the root): the mdev parent itself, or
    the PF of an SR-IOV GPU whose VFs are the mdev parents.
    ``parent_addresses`` are the mdev parents whose slots it carries
    (sorted; the parent alone unless the device is such a PF); the
    Placement path maps an allocation on the provider back to slots of
    those parents with them.
    """

    name: str
    uuid: str
    parent_uuid: str = None
    inventories: dict = dataclasses.field(default_factory=dict)
    traits: frozenset = frozenset()
    device_address: str = None
    parent_addresses: tuple = ()

    def to_dict(self):
        return {'name': self.name, 'uuid': self.uuid,
                'parent_uuid': self.parent_uuid,
                'device_address': self.device_address,
                'parent_addresses': list(self.parent_addresses),
                'inventories': {rc: inv.to_dict() for rc, inv in
                                sorted(self.inventories.items())},
                'traits': sorted(self.traits)}


@dataclasses.dataclass(frozen=True)
class ProviderTree:
    """The root provider and its children (sorted by name)."""

    root: Provider
    children: tuple = ()

    @property
    def providers(self):
        """Root first, then the children."""
        return (self.root,) + tuple(self.children)

    def by_uuid(self):
        return {p.uuid: p for p in self.providers}

    def to_dict(self):
        return {'root': self.root.to_dict(),
                'children': [c.to_dict() for c in self.children]}


def _root_inventories(root_inventories):
    result = {}
    for rc, inv in (root_inventories or {}).items():
        validate_resource_class(rc, 'root inventory resource class')
        result[rc] = inv if isinstance(inv, Inventory) else Inventory(
            total=inv)
    return result


def _slot_reserved(slot, placement_held):
    """True if Placement must not count ``slot`` as free."""
    if slot.status in _BLOCKED_BY_PARENT:
        return True
    if slot.status in Status.BUSY:
        return slot.instance_uuid not in placement_held
    return False


def physical_address(dev_type, address, parent_addr):
    """The address of the physical device whose provider carries the slots
    of the parent ``address``: its PF for an ``mdev-pf`` that is a VF (an
    SR-IOV GPU's mdev-capable VF), else the parent's own address."""
    if dev_type == DevType.MDEV_PF and parent_addr:
        return parent_addr
    return address


def _some(addresses):
    """``addresses`` sorted, the middle elided beyond four."""
    addresses = sorted(addresses)
    if len(addresses) <= 4:
        return ', '.join(addresses)
    return '%d parents: %s, %s, ..., %s' % (
        len(addresses), addresses[0], addresses[1], addresses[-1])


def mixed_parents_reason(exposed):
    """Why the mdev parents of one physical device cannot share its
    provider, or None. ``exposed``: ``{(mdev type, resource class):
    [parent address]}`` of those parents."""
    if len(exposed) < 2:
        return None
    return ('its mdev parents expose %s; Placement gets one provider per '
            'physical GPU, so all mdev parents of one GPU must expose the '
            'same mdev type and resource class (list them all in one '
            '[mdev_<type>] device_addresses)' % '; '.join(
                '%s (%s) on %s' % (t, rc, _some(addrs))
                for (t, rc), addrs in sorted(exposed.items())))


def _member(parent, slots, placement_held):
    """``(total, reserved)`` of one mdev parent's slots (uncapped)."""
    present = [s for s in slots if s.status not in Status.GONE
               and s.mdev_type == parent.mdev_type]
    total = len(present) + capacity.creatable(parent)
    if parent.status in Status.BUSY:
        return total, total
    # Slots still to create that an ancestor used whole blocks.
    blocked = capacity.creatable(parent) - capacity.usable(parent)
    return total, min(total, blocked + sum(
        1 for s in present if _slot_reserved(s, placement_held)))


def _rc_of(parent):
    extra = parent.extra_info if 'extra_info' in parent else {}
    return validate_resource_class(
        extra.get(extra_info.RESOURCE_CLASS, DEFAULT_RESOURCE_CLASS),
        'resource_class of device %s' % parent.address)


def _child(nodename, root_uuid, address, members, placement_held):
    """The provider of the physical device ``address``; ``members``:
    ``[(parent, its slots)]`` of the mdev parents it carries."""
    exposed = {}
    for parent, _slots in members:
        exposed.setdefault((parent.mdev_type, _rc_of(parent)), []).append(
            parent.address)
    reason = mixed_parents_reason(exposed)
    if reason is not None:
        raise _invalid('physical device', address, reason)
    ((mdev_type, rc),) = exposed
    first = members[0][0]
    if len(members) == 1 and first.address == address and first.dev_id:
        dev_id = first.dev_id
    else:
        dev_id = 'pci_' + _NON_ALNUM.sub('_', address)
    name = provider_name(nodename, dev_id)
    total = reserved = 0
    for parent, slots in members:
        got = _member(parent, slots, placement_held)
        total += got[0]
        reserved += got[1]
    # Placement holds at most MAX_INT of anything.
    total = min(MAX_INT, total)
    reserved = min(total, reserved)
    inventories = {rc: Inventory(total=total, reserved=reserved)} if (
        total) else {}
    return Provider(name=name, uuid=provider_uuid(name),
                    parent_uuid=root_uuid, inventories=inventories,
                    traits=frozenset([resource_class_trait_name(mdev_type)]),
                    device_address=address,
                    parent_addresses=tuple(sorted(
                        p.address for p, _s in members)))


def build_provider_tree(nodename, root_uuid, devices, placement_held=(),
                        root_inventories=None, root_traits=()):
    """Return the :class:`ProviderTree` of a host from its tracked devices.

    :param nodename: the compute node name (root provider name, prefix of
        the children's names).
    :param root_uuid: the compute node's provider uuid.
    :param devices: iterable of PciDevice objects (the tracker's devices).
    :param placement_held: instance uuids whose slots were claimed through
        the Placement path (their usage is Placement's allocations).
    :param root_inventories: optional ``{rc: Inventory | int}`` for the
        root (e.g. VCPU, MEMORY_MB for a scheduling test).
    :param root_traits: optional traits of the root.
    """
    if not isinstance(nodename, str) or not nodename:
        raise _invalid('nodename', nodename, 'expected a non-empty string')
    try:
        root_uuid = str(uuid_lib.UUID(str(root_uuid)))
    except ValueError:
        raise _invalid('root provider uuid', root_uuid, 'expected a UUID')
    placement_held = frozenset(placement_held)
    by_device = {}          # physical address -> [mdev parent]
    slots_by_parent = {}
    for dev in devices:
        if dev.dev_type in DevType.PARENT_TYPES:
            if dev.status not in Status.GONE and dev.mdev_type:
                by_device.setdefault(physical_address(
                    dev.dev_type, dev.address, dev.parent_addr),
                    []).append(dev)
        elif dev.parent_addr and (dev.dev_type == DevType.MDEV_VF or (
                dev.dev_type == DevType.SRIOV_VF and dev.mdev_type)):
            slots_by_parent.setdefault(dev.parent_addr, []).append(dev)
    children = [_child(nodename, root_uuid, address,
                       [(p, slots_by_parent.get(p.address, ()))
                        for p in sorted(parents, key=lambda d: d.address)],
                       placement_held)
                for address, parents in by_device.items()]
    children.sort(key=lambda p: p.name)
    root = Provider(name=nodename, uuid=root_uuid, parent_uuid=None,
                    inventories=_root_inventories(root_inventories),
                    traits=frozenset(root_traits))
    return ProviderTree(root=root, children=tuple(children))
