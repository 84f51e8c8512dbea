"""PciDevice: one assignable device of a compute host, and its state machine.

A device is a PCI function (``type-PCI``, ``type-PF``, ``type-VF``,
``vdpa``), an mdev-capable parent (``mdev-pf``) or one mdev slot
(``mdev-vf``, its ``address`` is the mdev UUID).

Status invariants (the tracker relies on them):

* ``available``: free, no owner.
* ``claimed`` / ``allocated``: owned by ``instance_uuid``.
* ``unclaimable``: free itself, but a relative is claimed; it returns to
  ``available`` when the relative is freed.
* ``unavailable``: free itself, but a relative is allocated.
* ``removed``: gone from the host while free; ``deleted`` once forgotten.

Parent/child rules, identical for PF/VF and for mdev parent/slot: a parent
may be used whole only while every present child is ``available``; using
it whole makes its children ``unclaimable`` (claim) or ``unavailable``
(allocate). Using a child makes the parent ``unclaimable``/``unavailable``;
freeing the last busy child makes the parent ``available`` again.

``parent_device`` and ``child_devices`` are not fields: the tracker links
them after loading, in one pass over its devices.
"""

from oslo_serialization import jsonutils
from oslo_utils import versionutils

from nova_pci_mdev import exception
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import bulk
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_states

Status = fields.PciDeviceStatus
DevType = fields.PciDeviceType

#: Fields a device record from the hypervisor may not overwrite.
_STATEFUL = frozenset(('status', 'instance_uuid', 'request_id', 'id',
                       'uuid', 'extra_info'))
#: ``extra_info`` keys a hypervisor record never sets nor clears; every
#: other key mirrors the latest record.
TRACKER_EXTRA_KEYS = frozenset((extra_info.MISSING,
                                extra_info.LISTED_UNDER))
#: What ``stored`` gives for a field that holds no value.
_UNSET = object()


@base.NovaPciMdevObjectRegistry.register
class PciDevice(pci_states.StateMachine, base.PersistentMixin,
                base.NovaPciMdevObject):
    """A device of a compute host, with Nova's fields plus ``mdev_type``."""

    # Version 1.0: Initial version
    # Version 1.1: String attributes updated to support unicode
    # Version 1.2: added request_id field
    # Version 1.3: Added field to represent PCI device NUMA node
    # Version 1.4: Added parent_addr field
    # Version 1.5: Added 2 new device statuses: UNCLAIMABLE and UNAVAILABLE
    # Version 1.6: Added uuid field
    # Version 1.7: Added 'vdpa' to 'dev_type' field
    # Version 1.8: Added mdev_type field, 'mdev-pf' and 'mdev-vf' dev_types,
    #              address and parent_addr accept mdev UUIDs and virtual
    #              parent names
    VERSION = '1.8'

    fields = {
        'id': fields.IntegerField(),
        'uuid': fields.UUIDField(),
        'compute_node_id': fields.IntegerField(nullable=True),
        'address': fields.PciAddressField(),
        'vendor_id': fields.StringField(),
        'product_id': fields.StringField(),
        'dev_type': fields.PciDeviceTypeField(),
        'status': fields.PciDeviceStatusField(),
        'dev_id': fields.StringField(nullable=True),
        'label': fields.StringField(nullable=True),
        'instance_uuid': fields.StringField(nullable=True),
        'request_id': fields.StringField(nullable=True),
        'extra_info': fields.DictOfStringsField(default={}),
        'numa_node': fields.IntegerField(nullable=True),
        'parent_addr': fields.PciAddressField(nullable=True),
        'mdev_type': fields.MdevTypeField(nullable=True),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent_device = None
        self.child_devices = []

    def __repr__(self):
        return 'PciDevice(address=%s, dev_type=%s, status=%s)' % (
            self.address if 'address' in self else None,
            self.dev_type if 'dev_type' in self else None,
            self.status if 'status' in self else None)

    def obj_load_attr(self, attrname):
        if attrname == 'extra_info':
            self.obj_set_defaults(attrname)
            return
        if attrname in ('mdev_type', 'parent_addr', 'numa_node', 'label',
                        'dev_id', 'instance_uuid', 'request_id',
                        'compute_node_id'):
            setattr(self, attrname, None)
            return
        super().obj_load_attr(attrname)

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 8):
            base.raise_on_too_new_values(
                target_version, primitive, 'dev_type', DevType.MDEV_TYPES)
            if (primitive.get('dev_type') == DevType.SRIOV_VF
                    and primitive.get('mdev_type') is not None):
                # An NVIDIA vGPU VF: 1.7 would make it a plain VF that is
                # passed through without its vGPU type.
                raise exception.ObjectActionError(
                    action='obj_make_compatible',
                    reason='a type-VF with mdev_type=%s (an NVIDIA vGPU VF) '
                           'cannot be represented in version %s' % (
                               primitive['mdev_type'], target_version))
            primitive.pop('mdev_type', None)
        if target < (1, 7):
            base.raise_on_too_new_values(
                target_version, primitive, 'dev_type', (DevType.VDPA,))
        if target < (1, 6):
            primitive.pop('uuid', None)
        if target < (1, 5):
            base.raise_on_too_new_values(
                target_version, primitive, 'status',
                (Status.UNCLAIMABLE, Status.UNAVAILABLE))
        if target < (1, 4) and 'parent_addr' in primitive:
            parent_addr = primitive.pop('parent_addr')
            if parent_addr is not None:
                extra = dict(primitive.get('extra_info') or {})
                extra[extra_info.PHYS_FUNCTION] = parent_addr
                primitive['extra_info'] = extra
        if target < (1, 3):
            primitive.pop('numa_node', None)
        if target < (1, 2):
            primitive.pop('request_id', None)

    # -- construction from hypervisor records -----------------------------

    @classmethod
    def create(cls, record):
        """A new ``available`` device from a device record (a dict).

        Same mapping as :meth:`update_device`, built in one pass.
        """
        return cls.maker()(record)

    @classmethod
    def maker(cls):
        """``make(record, address=None)``: :meth:`create` for a batch (a
        sync's new devices): records of one shape are validated once, only
        their address, ``dev_id`` and ``parent_addr`` one by one
        (:class:`~.bulk.Shapes`).
        ``address``: the record's address as ``names.normalize_address``
        (the field's own rule) returned it."""
        fields = cls.fields
        defaults = {'mdev_type': None, 'parent_addr': None,
                    'numa_node': None, 'status': Status.AVAILABLE,
                    'instance_uuid': None, 'request_id': None}

        def to_values(record):
            values = dict(defaults)
            extra = {}
            for key, value in record.items():
                if key in fields:
                    if key not in _STATEFUL:
                        values[key] = value
                elif key not in _STATEFUL:
                    extra[key] = value if isinstance(value, str) else (
                        jsonutils.dumps(value))
            extra.update(record.get('extra_info') or {})
            values['extra_info'] = extra
            return values

        shapes = bulk.Shapes(bulk.Maker(cls), to_values,
                             unique=('address', 'dev_id', 'parent_addr'),
                             nested='extra_info')
        next_uuid = bulk.random_uuids()
        build = shapes.make

        def make(record, address=None):
            if address is None:
                return build(record, {'uuid': next_uuid()})
            return build(record, {'uuid': next_uuid(), 'address': address})
        return make

    def update_device(self, record):
        """Apply a hypervisor record; return True if a field changed.

        Status, owner and identity are never taken from a record. Keys that
        are not fields go to ``extra_info`` (strings as they are, other
        values as JSON). ``extra_info`` afterwards holds exactly the
        record's extra keys plus :data:`TRACKER_EXTRA_KEYS`: a key the
        hypervisor stopped reporting (``resource_class`` after a type
        change) is dropped.
        """
        changed = False
        stored = self.stored
        old_extra = stored('extra_info', _UNSET)
        extra = {key: value for key, value in (
                     {} if old_extra is _UNSET else old_extra).items()
                 if key in TRACKER_EXTRA_KEYS}
        fields = self.fields
        for key, value in record.items():
            if key in _STATEFUL:
                continue
            if key in fields:
                current = stored(key, _UNSET)
                if current is _UNSET or current != value:
                    setattr(self, key, value)
                    changed = True
            else:
                extra[key] = value if isinstance(value, str) else (
                    jsonutils.dumps(value))
        for key in ('mdev_type', 'parent_addr', 'numa_node'):
            if key not in record and stored(key, _UNSET) is _UNSET:
                setattr(self, key, None)
        for key, value in (record.get('extra_info') or {}).items():
            if key not in TRACKER_EXTRA_KEYS:
                extra[key] = value
        if old_extra is _UNSET or extra != old_extra:
            self.extra_info = extra
            changed = True
        return changed

    # -- state machine -----------------------------------------------------

    @property
    def is_parent(self):
        return self.dev_type in DevType.PARENT_TYPES

    @property
    def is_child(self):
        return self.dev_type in DevType.CHILD_TYPES


@base.NovaPciMdevObjectRegistry.register
class PciDeviceList(base.ObjectListBase, base.NovaPciMdevObject):
    # Version 1.3: Nova 34.0.0 (PciDevice 1.7)
    # Version 1.4: PciDevice version 1.8
    VERSION = '1.4'

    fields = {
        'objects': fields.ListOfObjectsField('PciDevice'),
    }
    child_versions = {'1.3': '1.7', '1.4': '1.8'}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if 'objects' not in kwargs:
            self.objects = []
            self.obj_reset_changes()
