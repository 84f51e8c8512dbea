"""objects.base and PciDevice.create on oslo.versionedobjects' public API.

No storage names, descriptors or shared change sets: a device made from a
record is the object its constructor makes from the mapped values, and
``stored`` reads through ``obj_attr_is_set`` and the field's getter.
"""

import testtools

from oslo_versionedobjects import base as ovo_base

from nova_pci_mdev import objects
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import fields

objects.register_all()

UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'
RECORD = {'address': '0000:84:00.0', 'vendor_id': '10de',
          'product_id': '1EB8', 'dev_type': 'mdev-pf', 'numa_node': '1',
          'parent_addr': None, 'mdev_type': 'nvidia-35',
          'label': 'label_10de_1eb8', 'dev_id': 'pci_0000_84_00_0',
          'extra_info': {'creatable': '4'}, 'capabilities': {'a': [1]}}


class CreateTest(testtools.TestCase):
    """PciDevice.create against the constructor and oslo's setters."""

    def _setters(self, record):
        kwargs = {k: v for k, v in record.items()
                  if k in objects.PciDevice.fields and k != 'extra_info'}
        kwargs.update(status='available', instance_uuid=None,
                      request_id=None, uuid=UUID, extra_info=dict(
                          record['extra_info'], capabilities='{"a": [1]}'))
        return objects.PciDevice(**kwargs)

    def test_same_object_and_changes_as_the_setters_give(self):
        dev = objects.PciDevice.create(RECORD)
        expected = self._setters(RECORD)
        self.assertEqual(expected.obj_what_changed(), dev.obj_what_changed())
        self.assertTrue(fields.UUIDField().coerce(dev, 'uuid', dev.uuid))
        dev.uuid = UUID
        got, want = dev.obj_to_primitive(), expected.obj_to_primitive()
        for primitive in (got, want):
            primitive['nova_object.changes'].sort()
        self.assertEqual(want, got)
        self.assertEqual(1, dev.numa_node)       # coerced, not the text

    def test_devices_never_share_a_mutable_value(self):
        one = objects.PciDevice.create(RECORD)
        two = objects.PciDevice.create(RECORD)
        self.assertIsNot(one.extra_info, two.extra_info)
        one.extra_info['creatable'] = '0'
        self.assertEqual('4', two.extra_info['creatable'])
        self.assertNotEqual(one.uuid, two.uuid)

    def test_bad_values_are_refused_by_their_fields(self):
        for name, value in (('dev_type', 'type-X'), ('numa_node', 'one'),
                            ('address', '../x'), ('mdev_type', '../x'),
                            ('extra_info', {'k': ['not', 'a', 'string']})):
            self.assertRaises(ValueError, objects.PciDevice.create,
                              dict(RECORD, **{name: value}))

    def test_given_address_is_used(self):
        dev = objects.PciDevice.create(RECORD, '0000:84:00.0')
        self.assertEqual('0000:84:00.0', dev.address)
        self.assertIn('address', dev.obj_what_changed())


class PublicApiTest(testtools.TestCase):

    def test_no_override_of_oslo_internals(self):
        for name in ('obj_what_changed', 'obj_reset_changes',
                     'obj_attr_is_set', '__getattr__'):
            self.assertNotIn(name, vars(base.NovaPciMdevObject), name)
        for cls in (objects.PciDevice, objects.PciDevicePool,
                    objects.InstancePCIRequest):
            self.assertIs(ovo_base.VersionedObject.obj_what_changed,
                          cls.obj_what_changed, cls)

    def test_what_changed_is_oslo_s(self):
        dev = objects.PciDevice.create(RECORD)
        dev.obj_reset_changes()
        self.assertEqual(set(), dev.obj_what_changed())
        dev.status = 'claimed'
        self.assertEqual({'status'}, dev.obj_what_changed())


class StoredTest(testtools.TestCase):

    def test_reading_never_loads(self):
        dev = objects.PciDevice(address='0000:84:00.0')
        self.assertIsNone(dev.stored('parent_addr'))
        self.assertEqual('x', dev.stored('parent_addr', 'x'))
        self.assertEqual((None, '0000:84:00.0'),
                         dev.stored_values(('parent_addr', 'address')))
        self.assertFalse(dev.obj_attr_is_set('parent_addr'))
        self.assertEqual({'address'}, dev.obj_what_changed())
        self.assertIsNone(dev.stored('not_a_field'))

    def test_unset_fields_lazy_load_as_oslo_does(self):
        dev = objects.PciDevice(address='0000:84:00.0')
        self.assertIsNone(dev.parent_addr)       # obj_load_attr sets None
        self.assertIn('parent_addr', dev)
        self.assertEqual({}, dev.extra_info)      # its default
        self.assertRaises(NotImplementedError, getattr, dev, 'status')


class StrictUUIDTest(testtools.TestCase):

    def test_good_and_bad(self):
        field = fields.UUIDField()
        for good in (UUID, UUID.upper(), '{%s}' % UUID,
                     UUID.replace('-', '')):
            self.assertEqual(good, field.coerce(None, 'uuid', good))
        for bad in ('', 'NaN', '46x381', UUID + 'x', 7):
            self.assertRaises(ValueError, field.coerce, None, 'uuid', bad)
