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

Each transition walks the device's ancestors and descendants once and
uses the lists for its checks and its changes: checking and setting
statuses change no link, and a status a transition sets is never
``removed`` / ``deleted``, the only ones the walks leave out.
"""

from oslo_serialization import jsonutils
from oslo_utils import uuidutils
from oslo_utils import versionutils

from nova_pci_mdev import exception
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields

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
#: A parent in one of these may have a child used.
_PARENT_OK = (Status.AVAILABLE, Status.UNCLAIMABLE, Status.UNAVAILABLE)
_GONE = frozenset(Status.GONE)
#: Fields a new device holds None in when its record does not set them.
_NEW_DEFAULTS = {'mdev_type': None, 'parent_addr': None, 'numa_node': None,
                 'status': Status.AVAILABLE, 'instance_uuid': None,
                 'request_id': None}


@base.NovaPciMdevObjectRegistry.register
class PciDevice(base.PersistentMixin, base.NovaPciMdevObject):
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
    def create(cls, record, address=None):
        """A new ``available`` device from a device record (a dict), with
        a new random ``uuid``: the mapping of :meth:`update_device`, every
        value through its field's setter. ``address``: the record's address
        normalised by the caller (``names.normalize_address``, the field's
        own rule)."""
        values = dict(_NEW_DEFAULTS)
        extra = {}
        fields = cls.fields
        for key, value in record.items():
            if key in _STATEFUL:
                continue
            if key in fields:
                values[key] = value
            else:
                extra[key] = value if isinstance(value, str) else (
                    jsonutils.dumps(value))
        extra.update(record.get('extra_info') or {})
        values['extra_info'] = extra
        values['uuid'] = uuidutils.generate_uuid()
        if address is not None:
            values['address'] = address
        return cls(**values)

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

    @property
    def is_parent(self):
        return self.dev_type in DevType.PARENT_TYPES

    @property
    def is_child(self):
        return self.dev_type in DevType.CHILD_TYPES

    # -- state machine -----------------------------------------------------

    def present_children(self):
        return [c for c in self.child_devices if c.status not in Status.GONE]

    def ancestors(self):
        """Parent, grandparent... nearest first (a PF above a VF parent
        above an mdev slot: three levels). A cycle of links ends the walk
        (each device once, by identity)."""
        parent = self.parent_device
        if parent is None:
            return []
        found = []
        seen = {id(self)}
        while parent is not None and id(parent) not in seen:
            found.append(parent)
            seen.add(id(parent))
            parent = parent.parent_device
        return found

    def descendants(self):
        """Present children, grandchildren... (each once, by identity;
        linear in the devices below)."""
        todo = self.present_children()
        if not todo:
            return todo
        found = []
        seen = {id(self)}
        while todo:
            dev = todo.pop()
            if id(dev) in seen:
                continue
            seen.add(id(dev))
            found.append(dev)
            if dev.child_devices:
                todo.extend(dev.present_children())
        return found

    def _expect(self, statuses):
        if self.status not in statuses:
            raise exception.PciDeviceInvalidStatus(
                address=self.address, status=self.status,
                hopestatus=statuses)

    def _check_owner(self, instance_uuid):
        if instance_uuid is not None and self.instance_uuid != instance_uuid:
            raise exception.PciDeviceInvalidOwner(
                address=self.address, owner=self.instance_uuid,
                hopeowner=instance_uuid)

    def _check_children_free(self, below, tolerated=()):
        """``below``: this device's :meth:`descendants`."""
        busy = [c for c in below
                if c.status != Status.AVAILABLE and c.status not in tolerated]
        if busy:
            raise exception.PciDeviceChildrenBusy(
                address=self.address,
                children=', '.join('%s (%s)' % (c.address, c.status)
                                   for c in busy))

    def _check_parent_usable(self, above):
        """``above``: this device's :meth:`ancestors`."""
        for parent in above:
            if parent.status not in _PARENT_OK:
                raise exception.PciDeviceParentBusy(
                    address=self.address, parent_addr=parent.address,
                    status=parent.status, hopestatus=_PARENT_OK)

    def claim(self, instance_uuid):
        """``available`` -> ``claimed`` for ``instance_uuid``.

        Every descendant must be free (they become ``unclaimable``), no
        ancestor may be in use (the free ones become ``unclaimable``).
        Returns ``(descendants, ancestors)`` (the relatives, walked once:
        checking and setting change no link).
        """
        self._expect((Status.AVAILABLE,))
        below, above = self.descendants(), self.ancestors()
        if below:
            self._check_children_free(below)
        self._check_parent_usable(above)
        for dev in below:
            dev.status = Status.UNCLAIMABLE
        for parent in above:
            if parent.status == Status.AVAILABLE:
                parent.status = Status.UNCLAIMABLE
        self.status = Status.CLAIMED
        self.instance_uuid = instance_uuid
        return below, above

    def allocate(self, instance_uuid):
        """``available``/``claimed`` (by the same owner) -> ``allocated``;
        descendants and ancestors become ``unavailable``."""
        self._expect((Status.AVAILABLE, Status.CLAIMED))
        if self.status == Status.CLAIMED:
            self._check_owner(instance_uuid)
        below, above = self.descendants(), self.ancestors()
        self._check_children_free(below, tolerated=(Status.UNCLAIMABLE,))
        self._check_parent_usable(above)
        for dev in below + above:
            dev.status = Status.UNAVAILABLE
        self.status = Status.ALLOCATED
        self.instance_uuid = instance_uuid

    def free(self, instance_uuid=None):
        """``claimed``/``allocated`` -> ``available``.

        Returns every device that became available: this one, its
        descendants, and each ancestor once nothing below it is in use
        (an ancestor with only claims left below it is ``unclaimable``).
        """
        self._expect((Status.CLAIMED, Status.ALLOCATED))
        self._check_owner(instance_uuid)
        freed = [self]
        self.status = Status.AVAILABLE
        self.instance_uuid = None
        self.request_id = None
        below, above = self.descendants(), self.ancestors()
        for dev in below:
            dev.status = Status.AVAILABLE
            freed.append(dev)
        for parent in above:
            status = parent.status
            if status != Status.UNCLAIMABLE and status != Status.UNAVAILABLE:
                continue
            status = held_below(parent)
            if status == Status.AVAILABLE:
                freed.append(parent)
            parent.status = status      # recorded as changed, even if same
        return freed

    def remove(self):
        """A free device vanished from the host: -> ``removed``."""
        self._expect((Status.AVAILABLE, Status.UNCLAIMABLE,
                      Status.UNAVAILABLE))
        if self.instance_uuid is not None:
            raise exception.PciDeviceInvalidOwner(
                address=self.address, owner=self.instance_uuid,
                hopeowner=None)
        self.status = Status.REMOVED
        self.instance_uuid = None
        self.request_id = None

    def mark_deleted(self):
        """A removed device was forgotten by the store: -> ``deleted``."""
        self._expect((Status.REMOVED,))
        self.status = Status.DELETED


def held_below(parent):
    """The status a free ``parent`` gets from its descendants in use: the
    answer of ``{d.status for d in parent.descendants()}``, read in one
    pass (each status once; a device met twice, or the parent itself
    through a cycle of links, is free and changes nothing)."""
    held = Status.AVAILABLE
    todo = [parent]
    seen = {id(parent)}
    while todo:
        for dev in todo.pop().child_devices:
            status = dev.status
            if status in _GONE:
                continue
            if status == Status.ALLOCATED:
                return Status.UNAVAILABLE
            if status == Status.CLAIMED:
                held = Status.UNCLAIMABLE
            if dev.child_devices and id(dev) not in seen:
                seen.add(id(dev))
                todo.append(dev)
    return held


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
