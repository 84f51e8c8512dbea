"""Device records from parsed node devices: pure, no libvirt, no I/O.

:func:`build_records` turns the :mod:`.nodedev` objects of one listing into
the device records the tracker syncs from, with dict lookups only (linear in
the number of devices and slots); :class:`.host.Host` feeds it from a
libvirt connection, the tests and benchmarks feed it parsed XML directly.

Records (the device record contract of the tracker):

- PCI functions without mdev types: ``type-PCI``, ``type-PF`` (has a
  ``virt_functions`` capability) or ``type-VF`` (``parent_addr`` = PF);
- mdev parents (a PCI function with ``mdev_types``, or a virtual parent):
  ``mdev-pf`` with ``mdev_type`` = the one type it exposes
  (``settings.exposed_type``), ``extra_info['resource_class']`` when it
  exposes one, ``extra_info['supported_mdev_types']`` (comma-separated),
  ``extra_info['virtual'] = 'true'`` and empty vendor/product for virtual
  parents, ``extra_info['phys_function']`` and ``parent_addr`` (its PF)
  for an mdev-capable VF;
- its slots still to create are counted, not listed:
  ``extra_info['creatable']`` (a decimal string, absent at 0) on the parent
  record; the tracker materialises them when claimed (:class:`SlotFactory`,
  :mod:`nova_pci_mdev.pci.capacity`);
- its existing mdevs as ``mdev-vf`` records: address = mdev UUID, vendor,
  product and NUMA node of the parent, ``dev_id`` = the mdev's node
  name (None until libvirt knows the mdev), ``extra_info['mdev_exists']``
  ``'true'`` for an active mdev, ``'false'`` for a slot being created or
  a defined but stopped mdev (``isActive()`` False; it keeps its slot and
  uses up one available instance), and ``extra_info['mdev_exposed'] =
  'true'``;
- existing mdevs of a type the parent does not expose (left over after a
  configuration change): ``mdev-vf`` records with their own ``mdev_type``
  and ``extra_info['mdev_exposed'] = 'false'``, so that they stay visible
  (an instance may hold one) but the tracker must not hand them out.

Nothing libvirt lists is left out without a word: every node device that
yields no record is reported in ``left_out`` (a ``NodeDeviceLeftOut``
naming it and why, with what is known of it), exactly once: a device whose
address or UUID another one claims too (:func:`unique`), an mdev parent of
another kind (s390 ``ap_matrix``, ``css``: :class:`.nodedev.
OtherMdevParent`), and an mdev whose parent is missing, left out or no
mdev parent (a guest may be using it; it is still returned by
:meth:`.host.Host.list_mdevs`). Stand-ins for held mdevs the host no
longer lists (:func:`vanished_stand_ins`) are libvirt's to report, not
ours: an orphaned one is kept out silently.
"""

import collections

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import slots

DevType = fields.PciDeviceType


def _label(vendor_id, product_id):
    return 'label_%s_%s' % (vendor_id, product_id)


def _record(address, vendor_id, product_id, dev_type, numa_node, dev_id,
            parent_addr=None, mdev_type=None, extra_info=None):
    return {
        'address': address,
        'vendor_id': vendor_id,
        'product_id': product_id,
        'dev_type': dev_type,
        'numa_node': numa_node,
        'parent_addr': parent_addr,
        'mdev_type': mdev_type,
        'label': _label(vendor_id, product_id),
        'dev_id': dev_id,
        'extra_info': dict(extra_info or {}),
    }


def _pci_record(dev):
    if dev.is_vf:
        dev_type, parent_addr = DevType.SRIOV_VF, dev.phys_function
    elif dev.is_pf:
        dev_type, parent_addr = DevType.SRIOV_PF, None
    else:
        dev_type, parent_addr = DevType.STANDARD, None
    return _record(dev.address, dev.vendor_id, dev.product_id, dev_type,
                   dev.numa_node, dev.name, parent_addr=parent_addr)


def _parent_records(nodename, dev, mdevs, settings, counts):
    """The ``mdev-pf`` record of ``dev`` followed by its ``mdev-vf``s; a
    parent exposing a type is added to ``counts`` as ``(record, options,
    existing, available)``: its creatable count is set once every parent
    is known (:func:`_set_creatable`)."""
    virtual = isinstance(dev, nodedev.VirtualParent)
    supported = {t.id: t for t in dev.mdev_types}
    options = settings.exposed_type(dev.address, tuple(supported))
    exposed = options.mdev_type if options is not None else None
    extra = {extra_info.SUPPORTED_MDEV_TYPES: ','.join(supported)}
    if virtual:
        extra[extra_info.VIRTUAL] = extra_info.TRUE
        extra[extra_info.WHOLE] = extra_info.FALSE
    elif dev.is_vf:
        extra[extra_info.PHYS_FUNCTION] = dev.phys_function
    if options is not None and options.resource_class:
        extra[extra_info.RESOURCE_CLASS] = options.resource_class
    parent = _record(dev.address, '' if virtual else dev.vendor_id,
                     '' if virtual else dev.product_id, DevType.MDEV_PF,
                     None if virtual else dev.numa_node, dev.name,
                     mdev_type=exposed, extra_info=extra,
                     # An mdev-capable VF sits below its PF: three levels.
                     parent_addr=None if virtual or not dev.is_vf
                     else dev.phys_function)
    by_uuid = {m.uuid: m for m in mdevs}
    mine = ()
    if exposed is not None:
        mine = sorted({m.uuid for m in mdevs if m.mdev_type == exposed})
        counts.append((parent, options, len(mine), _available(
            supported.get(exposed), [by_uuid[u] for u in mine])))
    others = sorted((m for m in mdevs if m.mdev_type != exposed),
                    key=lambda m: m.uuid)
    return ([parent]
            + [_slot(parent, u, exposed, by_uuid[u], True) for u in mine]
            + [_slot(parent, m.uuid, m.mdev_type, m, False) for m in others])


def _available(kind, mine):
    """How many more mdevs of the exposed type the parent can create,
    before any limit; ``mine`` are its mdevs of that type."""
    # An exposed type the parent does not list (configuration naming the
    # wrong parent) gets slots for its existing mdevs only.
    available = kind.available_instances if kind is not None else 0
    # A defined but stopped mdev keeps its UUID (it is a slot) but does not
    # hold an instance yet: starting it will take one of the available
    # instances, so that one is not a creatable slot.
    stopped = sum(1 for m in mine if not m.active)
    return max(0, available - stopped)


def _set_creatable(counts, settings):
    """Set each parent's creatable count of ``counts`` within the
    ``max_instances`` limits of its type
    (:func:`.slots.creatable_per_parent`)."""
    for (parent, _o, _e, _a), count in zip(
            counts, slots.creatable_per_parent(counts, settings)):
        if count:
            parent['extra_info'][extra_info.CREATABLE] = str(count)


def _slot(parent, uuid, mdev_type, found, is_exposed):
    """The ``mdev-vf`` record of slot ``uuid`` of ``parent`` (a record);
    ``found`` is its parsed mdev, None when it does not exist yet."""
    return _record(uuid, parent['vendor_id'], parent['product_id'],
                   DevType.MDEV_VF, parent['numa_node'],
                   found.name if found else None,
                   parent_addr=parent['address'], mdev_type=mdev_type,
                   extra_info={
                       extra_info.MDEV_EXISTS: extra_info.flag(
                           found is not None and found.active),
                       extra_info.MDEV_EXPOSED: extra_info.flag(is_exposed),
                   })


def new_slot_record(parent, uuid):
    """The record of a slot of ``parent`` (a PciDevice) whose mdev is still
    to create: what discovery reports for it once it is claimed."""
    return _record(uuid, parent.vendor_id, parent.product_id,
                   DevType.MDEV_VF, parent.numa_node, None,
                   parent_addr=parent.address, mdev_type=parent.mdev_type,
                   extra_info={extra_info.MDEV_EXISTS: extra_info.FALSE,
                               extra_info.MDEV_EXPOSED: extra_info.TRUE})


class SlotFactory(object):
    """The tracker's ``slot_factory`` (see :mod:`nova_pci_mdev.pci.
    capacity`) for the compute node ``nodename``: new slots get the
    UUIDs of :func:`.slots.new_slot_uuids`."""

    #: The parent fields :meth:`prototype` reads (with the constant
    #: ``nodename``): equal values, an equal prototype.
    prototype_fields = ('address', 'vendor_id', 'product_id', 'numa_node',
                        'mdev_type')

    def __init__(self, nodename):
        self.nodename = nodename

    def prototype(self, parent):
        return new_slot_record(parent, slots.slot_uuid(
            self.nodename, parent.address, parent.mdev_type, 0))

    def records(self, parent, taken, count):
        return [new_slot_record(parent, uuid) for uuid in
                slots.new_slot_uuids(self.nodename, parent.address,
                                     parent.mdev_type, taken, count)]


def _identity(dev):
    if isinstance(dev, nodedev.Mdev):
        return 'UUID', dev.uuid
    if isinstance(dev, (nodedev.PciFunction, nodedev.VirtualParent)):
        return 'address', dev.address
    return None


def unique(devices, left_out):
    """``devices`` without every node device whose address (or mdev UUID)
    another one claims too: which of them is right cannot be told, so all
    are left out, each reported in ``left_out`` (NodeDeviceLeftOut)."""
    devices = [d for d in devices if d is not None]
    owners = collections.defaultdict(list)
    for dev in devices:
        key = _identity(dev)
        if key is not None:
            owners[key].append(dev.name)
    kept = []
    for dev in devices:
        key = _identity(dev)
        names_ = owners.get(key, ())
        if len(names_) > 1:
            left_out.append(exception.NodeDeviceLeftOut(
                device=dev.name, reason='its %s %s is also that of node '
                'device(s) %s' % (key[0], key[1], ', '.join(
                    n for n in names_ if n != dev.name) or dev.name)))
            continue
        kept.append(dev)
    return kept


def _index(devices, left_out):
    """Split parsed devices; map node names to addresses; drop devices
    whose identity is claimed twice, and other kinds of mdev parents."""
    address_of = {}
    functions = []
    mdevs = []
    for dev in unique(devices, left_out):
        if isinstance(dev, nodedev.Mdev):
            mdevs.append(dev)
        elif isinstance(dev, (nodedev.PciFunction, nodedev.VirtualParent)):
            functions.append(dev)
            address_of[dev.name] = dev.address
        elif isinstance(dev, nodedev.OtherMdevParent):
            left_out.append(_other_parent(dev))
    return functions, mdevs, address_of


def _other_parent(dev):
    types = ','.join(t.id for t in dev.mdev_types)
    return exception.NodeDeviceLeftOut(
        device=dev.name, address=dev.address, mdev_types=types,
        reason='an mdev parent of kind %s offering mdev type(s) %s: '
               'nova-pci-mdev uses only PCI functions and virtual devices '
               '(mtty) as mdev parents, so none of its types is offered'
               % (dev.kind, types))


def _orphan(mdev, parent_addr, functions, left_names):
    """The NodeDeviceLeftOut of an mdev whose parent is no mdev parent of
    the listing (``parent_addr``: where its parent would be)."""
    parent = mdev.parent or mdev.parent_addr or parent_addr
    found = functions.get(parent_addr)
    if parent is None:
        why = 'it names no parent'
    elif parent in left_names or parent_addr in left_names:
        why = 'its parent %s is left out too' % parent
    elif found is not None:
        why = 'its parent %s (%s) has no mdev types' % (found.name,
                                                        found.address)
    else:
        why = ('its parent %s is not listed by libvirt as a PCI function or '
               'an mdev parent' % parent)
    return exception.NodeDeviceLeftOut(
        device=mdev.name, address=mdev.uuid,
        dev_type=DevType.MDEV_VF, mdev_type=mdev.mdev_type, parent=parent,
        parent_addr=parent_addr,
        reason='mdev %s of type %s, which a guest may be using, is not '
               'tracked: %s' % (mdev.uuid, mdev.mdev_type, why))


def build_records(nodename, devices, settings, left_out=None,
                  stand_ins=()):
    """Device records from parsed node devices (see the module docstring).

    ``devices``: :mod:`.nodedev` objects (None entries and other kinds are
    ignored). ``settings``: anything with ``exposed_type(parent_addr,
    supported_type_ids) -> MdevTypeOptions | None``, ``parent_limits(
    record) -> (covered, limit)`` and ``per_host(mdev_type) -> bool``
    (:class:`~nova_pci_mdev.conf.settings.Settings`). Parents come sorted by
    address, each followed by its slots. Every device that gives no record
    is reported in ``left_out`` (a list), once. ``stand_ins``:
    :func:`vanished_stand_ins` of held slots (never reported).
    """
    left_out = left_out if left_out is not None else []
    functions, mdevs, address_of = _index(list(devices) + list(stand_ins),
                                          left_out)
    by_parent = collections.defaultdict(list)
    for mdev in mdevs:
        by_parent[nodenames.parent_address(mdev, address_of)].append(mdev)
    _report_orphans(by_parent, functions, stand_ins, left_out)
    records = []
    counts = []
    for dev in sorted(functions, key=lambda d: d.address):
        if isinstance(dev, nodedev.VirtualParent) or dev.is_mdev_parent:
            records.extend(_parent_records(
                nodename, dev, by_parent.get(dev.address, ()), settings,
                counts))
        else:
            records.append(_pci_record(dev))
    _set_creatable(counts, settings)
    return records


def _report_orphans(by_parent, functions, stand_ins, left_out):
    """Report the mdevs of ``by_parent`` (``{parent address: mdevs}``)
    whose parent gives no records, stand-ins excepted."""
    parents = {d.address for d in functions
               if isinstance(d, nodedev.VirtualParent) or d.is_mdev_parent}
    orphans = sorted(((m, key) for key, group in by_parent.items()
                      if key not in parents for m in group),
                     key=lambda pair: pair[0].name)
    if not orphans:
        return
    ours = {id(m) for m in stand_ins}
    plain = {d.address: d for d in functions if d.address not in parents}
    left_names = {p.kwargs.get(k) for p in left_out
                  for k in ('device', 'address')} - {None}
    left_out.extend(_orphan(m, key, plain, left_names)
                    for m, key in orphans if id(m) not in ours)


def value_warnings(dev):
    """NodeDeviceValueCapped of each count of ``dev`` (a parsed node
    device) that :mod:`.nodedev` capped."""
    return [exception.NodeDeviceValueCapped(
                device=dev.name, field='availableInstances of %s' % kind.id,
                value=kind.reported_instances, cap=nodedev.MAX_COUNT)
            for kind in getattr(dev, 'mdev_types', ())
            if kind.reported_instances is not None]


def vanished_stand_ins(devices, held):
    """Stopped :class:`~.nodedev.Mdev` stand-ins for held, unlisted slots."""
    listed = {d.uuid for d in devices if isinstance(d, nodedev.Mdev)}
    return [nodedev.Mdev(name=nodenames.mdev_node_name(uuid), uuid=uuid,
                         mdev_type=mdev_type, parent_addr=parent_addr,
                         active=False)
            for uuid, parent_addr, mdev_type in held if uuid not in listed]
