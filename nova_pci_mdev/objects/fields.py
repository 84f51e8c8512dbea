"""Field types of nova-pci-mdev objects.

Invariant: an enum field holds only the values listed in its ``ALL``; an
address field holds only what :func:`nova_pci_mdev.names.normalize_address`
returns; an mdev type field holds only safe type names. A bad value raises
:class:`~nova_pci_mdev.exception.InvalidValue` (a ``ValueError`` is what
oslo.versionedobjects expects from ``coerce``, so our errors subclass both).
"""

import re
import uuid as uuid_lib

from oslo_versionedobjects import fields

from nova_pci_mdev import exception
from nova_pci_mdev import names

# Re-export the generic field classes our objects use, so object modules
# import one ``fields`` module.
BooleanField = fields.BooleanField
DateTimeField = fields.DateTimeField
DictOfNullableStringsField = fields.DictOfNullableStringsField
DictOfStringsField = fields.DictOfStringsField
IntegerField = fields.IntegerField
ListOfDictOfNullableStringsField = fields.ListOfDictOfNullableStringsField
ListOfObjectsField = fields.ListOfObjectsField
ObjectField = fields.ObjectField
StringField = fields.StringField


class InvalidFieldValue(exception.InvalidValue, ValueError):
    """Raised from ``coerce``: a project error that o.vo also understands."""


class BaseEnum(object):
    ALL = ()

    def __init__(self):
        raise TypeError('%s is a namespace of constants' % type(self))


class PciDeviceStatus(BaseEnum):
    AVAILABLE = 'available'
    CLAIMED = 'claimed'
    ALLOCATED = 'allocated'
    REMOVED = 'removed'          # gone from the host, not yet deleted
    DELETED = 'deleted'          # deleted from the store
    UNCLAIMABLE = 'unclaimable'  # a relative is claimed
    UNAVAILABLE = 'unavailable'  # a relative is allocated

    ALL = (AVAILABLE, CLAIMED, ALLOCATED, REMOVED, DELETED, UNCLAIMABLE,
           UNAVAILABLE)
    #: An instance holds the device.
    BUSY = frozenset((CLAIMED, ALLOCATED))
    #: Nobody holds the device (its relatives may be busy).
    FREE = frozenset((AVAILABLE, UNCLAIMABLE, UNAVAILABLE))
    #: The device left the host (or the store); relatives ignore it.
    GONE = frozenset((REMOVED, DELETED))


class PciDeviceType(BaseEnum):
    """Device types; every value fits Nova's ``String(8)`` column."""

    STANDARD = 'type-PCI'
    SRIOV_PF = 'type-PF'
    SRIOV_VF = 'type-VF'
    VDPA = 'vdpa'
    MDEV_PF = 'mdev-pf'
    MDEV_VF = 'mdev-vf'

    ALL = (STANDARD, SRIOV_PF, SRIOV_VF, VDPA, MDEV_PF, MDEV_VF)
    #: Types that Nova 34.0.0 (PciDevice 1.7) does not know.
    MDEV_TYPES = (MDEV_PF, MDEV_VF)
    #: Types that can have children, and the child types of each.
    PARENT_TYPES = (SRIOV_PF, MDEV_PF)
    CHILD_TYPES = (SRIOV_VF, VDPA, MDEV_VF)


class PCINUMAAffinityPolicy(BaseEnum):
    REQUIRED = 'required'
    LEGACY = 'legacy'
    PREFERRED = 'preferred'
    SOCKET = 'socket'

    ALL = (REQUIRED, LEGACY, PREFERRED, SOCKET)


class _Enum(fields.FieldType):
    """Enum whose error names the field, the value and the valid values."""

    def __init__(self, valid_values, what):
        self._valid_values = tuple(valid_values)
        self._what = what
        super().__init__()

    def coerce(self, obj, attr, value):
        if not isinstance(value, str) or value not in self._valid_values:
            raise InvalidFieldValue(
                field=attr, value=value,
                rule='%s must be one of %s' % (
                    self._what, ', '.join(self._valid_values)))
        return value

    def stringify(self, value):
        return "'%s'" % value

    def get_schema(self):
        return {'type': ['string'], 'enum': list(self._valid_values)}


class PciDeviceStatusField(fields.AutoTypedField):
    AUTO_TYPE = _Enum(PciDeviceStatus.ALL, 'a PCI device status')


class PciDeviceTypeField(fields.AutoTypedField):
    AUTO_TYPE = _Enum(PciDeviceType.ALL, 'a PCI device type')


class PCINUMAAffinityPolicyField(fields.AutoTypedField):
    AUTO_TYPE = _Enum(PCINUMAAffinityPolicy.ALL, 'a PCI NUMA affinity policy')


#: The canonical spelling (any case): valid without asking uuid.UUID.
_UUID_RE = re.compile(r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
                      r'[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z')


class UUID(fields.UUID):
    """A UUID, refused unless :class:`uuid.UUID` parses it.

    oslo.versionedobjects' own ``UUID`` accepts anything with a
    FutureWarning; its documentation asks projects to validate in their own
    field, as here. The value is kept as given (no normalisation), so
    valid values and the wire format are those of oslo's field.
    """

    def coerce(self, obj, attr, value):
        text = str(value)
        if _UUID_RE.match(text):
            return text
        try:
            uuid_lib.UUID(text)
        except ValueError:
            raise InvalidFieldValue(field=attr, value=value, rule='a UUID')
        return text


class UUIDField(fields.AutoTypedField):
    AUTO_TYPE = UUID()


class _Validated(fields.FieldType):
    """A string that ``validate`` normalises, or refuses with ``rule``."""

    rule = ''
    max_length = 0

    @staticmethod
    def validate(value):
        raise NotImplementedError

    def coerce(self, obj, attr, value):
        try:
            return self.validate(value)
        except exception.Invalid:
            raise InvalidFieldValue(field=attr, value=value, rule=self.rule)

    def get_schema(self):
        return {'type': ['string'], 'maxLength': self.max_length}


class PciAddress(_Validated):
    """A PCI address, an mdev UUID or a virtual parent name (normalised)."""

    validate = staticmethod(names.normalize_address)
    rule = names.ADDRESS_RULE
    max_length = names.MAX_ADDRESS_LEN


class PciAddressField(fields.AutoTypedField):
    AUTO_TYPE = PciAddress()


class MdevType(_Validated):
    """An mdev type name, safe to use as a sysfs path component."""

    validate = staticmethod(names.validate_mdev_type)
    rule = names.MDEV_TYPE_RULE
    max_length = names.MAX_MDEV_TYPE_LEN


class MdevTypeField(fields.AutoTypedField):
    AUTO_TYPE = MdevType()
