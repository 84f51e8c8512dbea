"""Good and bad values for every field type of our own."""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields

UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'

ADDRESS_GOOD = [
    # (given, stored)
    ('0000:84:00.0', '0000:84:00.0'),
    ('0000:D8:1F.7', '0000:d8:1f.7'),
    ('ffff:ff:1f.7', 'ffff:ff:1f.7'),
    (UUID, UUID),
    (UUID.upper(), UUID),
    ('mtty', 'mtty'),
    ('mdpy_fb-0', 'mdpy_fb-0'),
    ('Mtty', 'Mtty'),
    ('a' * 64, 'a' * 64),
]

ADDRESS_BAD = [
    '',
    '0000:84:00.0/../../x',
    '../mtty',
    'mtty/..',
    '/sys/class',
    '0000:84:00.0.1',
    '0000:84:00.8',        # function is 3 bits
    '0000:84:20.0',        # slot is 5 bits
    '000:84:00.0',
    '0000:84:00',
    '0000:84:0g.0',
    'mtty\x00',
    'a' * 65,
    '0mtty',
    'mtty\n',
    '0000:84:00.0\n',
    'abcdef01-1b54-4048-85b3',
    UUID + '0',
    ' mtty',
    42,
]

MDEV_TYPE_GOOD = ['nvidia-35', 'i915-GVTg_V5_4', 'mlx5_core-local',
                  'mtty-1', 'vendor:type.v2']
MDEV_TYPE_BAD = ['', '..', '../nvidia-35', 'nvidia/35', '.hidden',
                 'a..b', 'x' * 129, 'nvidia 35', 'type\x00', 'nvidia-35\n', 7]


class _Holder(object):
    """Coerce through the real field types, as objects do."""

    def coerce(self, field, value):
        return field.coerce(self, 'fieldname', value)


class TestPciAddressField(testtools.TestCase):

    def test_good(self):
        field = fields.PciAddressField()
        for given, stored in ADDRESS_GOOD:
            self.assertEqual(stored, _Holder().coerce(field, given), given)

    def test_bad(self):
        field = fields.PciAddressField()
        for value in ADDRESS_BAD:
            err = self.assertRaises(exception.InvalidValue,
                                    _Holder().coerce, field, value)
            self.assertIn(repr(value), str(err))
            self.assertIn('fieldname', str(err))
            # oslo.versionedobjects expects ValueError from coerce.
            self.assertIsInstance(err, ValueError)

    def test_nullable(self):
        field = fields.PciAddressField(nullable=True)
        self.assertIsNone(_Holder().coerce(field, None))

    def test_none_refused_when_not_nullable(self):
        for field in (fields.PciAddressField(), fields.MdevTypeField(),
                      fields.PciDeviceTypeField()):
            err = self.assertRaises(ValueError, _Holder().coerce, field, None)
            self.assertIn('fieldname', str(err))


class TestMdevTypeField(testtools.TestCase):

    def test_good(self):
        field = fields.MdevTypeField()
        for value in MDEV_TYPE_GOOD:
            self.assertEqual(value, _Holder().coerce(field, value))

    def test_bad(self):
        field = fields.MdevTypeField()
        for value in MDEV_TYPE_BAD:
            err = self.assertRaises(exception.InvalidValue,
                                    _Holder().coerce, field, value)
            self.assertIn(repr(value), str(err))


ENUMS = [
    (fields.PciDeviceTypeField, fields.PciDeviceType.ALL,
     ['type-pci', 'mdev', 'type-MDEV', '', 3]),
    (fields.PciDeviceStatusField, fields.PciDeviceStatus.ALL,
     ['free', 'Available', '']),
    (fields.PCINUMAAffinityPolicyField, fields.PCINUMAAffinityPolicy.ALL,
     ['strict', 'REQUIRED', '']),
]


class TestEnums(testtools.TestCase):

    def test_good_and_bad(self):
        for field_cls, good, bad in ENUMS:
            field = field_cls()
            for value in good:
                self.assertEqual(value, _Holder().coerce(field, value))
            for value in bad:
                err = self.assertRaises(exception.InvalidValue,
                                        _Holder().coerce, field, value)
                self.assertIn(good[0], str(err))  # lists valid values

    def test_dev_types_fit_nova_column(self):
        # nova.db pci_devices.dev_type is String(8).
        for value in fields.PciDeviceType.ALL:
            self.assertLessEqual(len(value), 8, value)

    def test_mdev_constants(self):
        self.assertEqual('mdev-pf', fields.PciDeviceType.MDEV_PF)
        self.assertEqual('mdev-vf', fields.PciDeviceType.MDEV_VF)
        self.assertIn('mdev-pf', fields.PciDeviceType.PARENT_TYPES)
        self.assertIn('mdev-vf', fields.PciDeviceType.CHILD_TYPES)

    def test_enum_namespace_not_instantiable(self):
        self.assertRaises(TypeError, fields.PciDeviceType)
