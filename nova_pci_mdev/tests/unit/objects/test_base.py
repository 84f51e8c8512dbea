"""objects.base: bulk restore, fast field getters, strict UUIDs.

Restorer and the fast getters write and read where oslo.versionedobjects
keeps field values; these tests pin them to what oslo's own setter and
getter do, so that a change in oslo's storage fails here first.
"""

import testtools

from nova_pci_mdev import objects
from nova_pci_mdev.objects import bulk
from nova_pci_mdev.objects import fields
from nova_pci_mdev.store import schema as store_schema

objects.register_all()

UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'
ROW = {'address': '0000:84:00.0', 'uuid': UUID, 'id': None,
       'compute_node_id': None, 'vendor_id': '10de', 'product_id': '1eb8',
       'dev_type': 'mdev-pf', 'status': 'available', 'dev_id': 'pci_x',
       'label': 'label_10de_1eb8', 'instance_uuid': None,
       'request_id': None, 'extra_info': '{}', 'numa_node': 1,
       'parent_addr': None, 'mdev_type': 'nvidia-35'}
NAMES = store_schema.COLUMN_NAMES


def _restore(row, restorer=None):
    restorer = restorer or bulk.Restorer(objects.PciDevice, NAMES,
                                         ready=('extra_info',))
    return restorer([row[n] for n in NAMES], {'a': 'b'})


class RestorerTest(testtools.TestCase):

    def test_same_object_as_the_setters_give(self):
        dev = _restore(ROW)
        kwargs = {k: v for k, v in ROW.items()
                  if v is not None or objects.PciDevice.fields[k].nullable}
        kwargs['extra_info'] = {'a': 'b'}
        expected = objects.PciDevice(**kwargs)
        expected.obj_reset_changes()
        self.assertEqual(expected.obj_to_primitive(), dev.obj_to_primitive())
        self.assertEqual(set(), dev.obj_what_changed())
        dev.status = 'claimed'
        self.assertEqual({'status'}, dev.obj_what_changed())

    def test_values_are_validated_by_their_fields(self):
        for name, value in (('status', 'busy'), ('uuid', 'NaN'),
                            ('address', '../x'), ('numa_node', 'one'),
                            ('dev_type', 'type-X')):
            self.assertRaises(ValueError, _restore, dict(ROW, **{name: value}))

    def test_memo_never_hides_a_bad_value(self):
        restorer = bulk.Restorer(objects.PciDevice, NAMES,
                                 ready=('extra_info',))
        _restore(ROW, restorer)
        self.assertRaises(ValueError, _restore,
                          dict(ROW, numa_node='1x'), restorer)
        # The same text in another column type coerces on its own.
        self.assertEqual(1, _restore(dict(ROW, numa_node='1'),
                                     restorer).numa_node)

    def test_none_leaves_a_required_field_unset(self):
        dev = _restore(dict(ROW, vendor_id=None))
        self.assertNotIn('vendor_id', dev)
        self.assertIn('parent_addr', dev)
        self.assertIsNone(dev.parent_addr)


RECORD = {'address': '0000:84:00.0', 'vendor_id': '10de',
          'product_id': '1EB8', 'dev_type': 'mdev-pf', 'numa_node': '1',
          'parent_addr': None, 'mdev_type': 'nvidia-35',
          'label': 'label_10de_1eb8', 'dev_id': 'pci_0000_84_00_0',
          'extra_info': {'creatable': '4'}, 'capabilities': {'a': [1]}}


class MakerTest(testtools.TestCase):
    """PciDevice.maker() (objects.base.Maker) against oslo's setters."""

    def _setters(self, record):
        kwargs = {k: v for k, v in record.items()
                  if k in objects.PciDevice.fields and k != 'extra_info'}
        kwargs.update(status='available', instance_uuid=None,
                      request_id=None, uuid=UUID, extra_info=dict(
                          record['extra_info'], capabilities='{"a": [1]}'))
        return objects.PciDevice(**kwargs)

    def test_same_object_and_changes_as_the_setters_give(self):
        make = objects.PciDevice.maker()
        for _ in range(2):          # the second from the memo
            dev = make(RECORD)
            expected = self._setters(RECORD)
            self.assertEqual(expected.obj_what_changed(),
                             dev.obj_what_changed())
            dev.uuid = UUID
            got, want = dev.obj_to_primitive(), expected.obj_to_primitive()
            for primitive in (got, want):
                primitive['nova_object.changes'].sort()
            self.assertEqual(want, got)
        self.assertEqual(1, dev.numa_node)       # coerced, not the text
        self.assertEqual(objects.PciDevice.create(RECORD).uuid.count('-'),
                         4)

    def test_devices_never_share_a_mutable_value(self):
        make = objects.PciDevice.maker()
        one, two = make(RECORD), make(RECORD)
        self.assertIsNot(one.extra_info, two.extra_info)
        one.extra_info['creatable'] = '0'
        self.assertEqual('4', two.extra_info['creatable'])
        self.assertNotEqual(one.uuid, two.uuid)

    def test_bad_values_fail_each_time(self):
        make = objects.PciDevice.maker()
        make(RECORD)
        for name, value in (('dev_type', 'type-X'), ('numa_node', 'one'),
                            ('address', '../x'), ('mdev_type', '../x'),
                            ('extra_info', {'k': ['not', 'a', 'string']})):
            bad = dict(RECORD, **{name: value})
            self.assertRaises(ValueError, make, bad)
            self.assertRaises(ValueError, make, bad)

    def test_ready_address_is_stored_as_given(self):
        dev = objects.PciDevice.maker()(RECORD, '0000:84:00.0')
        self.assertEqual('0000:84:00.0', dev.address)
        self.assertIn('address', dev.obj_what_changed())


class WhatChangedTest(testtools.TestCase):

    def test_same_answer_as_oslo(self):
        from oslo_versionedobjects import base as ovo_base
        dev = objects.PciDevice.create(RECORD)
        requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(count=1, spec=[{'vendor_id': 'x'}])])
        for obj in (dev, objects.PciDevice(), requests):
            self.assertEqual(ovo_base.VersionedObject.obj_what_changed(obj),
                             obj.obj_what_changed())
            obj.obj_reset_changes()
            self.assertEqual(set(), obj.obj_what_changed())
        dev.status = 'claimed'
        self.assertEqual({'status'}, dev.obj_what_changed())


class FastGetterTest(testtools.TestCase):

    def test_unset_fields_lazy_load_as_before(self):
        dev = objects.PciDevice(address='0000:84:00.0')
        self.assertNotIn('parent_addr', dev)
        self.assertIsNone(dev.parent_addr)       # obj_load_attr sets None
        self.assertIn('parent_addr', dev)
        self.assertEqual({}, dev.extra_info)      # its default
        self.assertRaises(NotImplementedError, getattr, dev, 'status')

    def test_no_getattr_hook(self):
        # A __getattr__ anywhere in the MRO sends every attribute read of
        # a device (links, methods, fields) down Python's slow path.
        for cls in (objects.PciDevice, objects.PciDeviceList,
                    objects.InstancePCIRequest):
            self.assertEqual([], [k for k in cls.__mro__
                                  if '__getattr__' in vars(k)], cls)

    def test_reading_storage_never_loads(self):
        dev = objects.PciDevice(address='0000:84:00.0')
        self.assertIsNone(dev.stored('parent_addr'))
        self.assertEqual((None, '0000:84:00.0'),
                         dev.stored_values(('parent_addr', 'address')))
        self.assertFalse(dev.obj_attr_is_set('parent_addr'))
        self.assertNotIn('parent_addr', dev)
        self.assertEqual({'address'}, dev.obj_what_changed())

    def test_delete_as_oslo(self):
        dev = objects.PciDevice(address='0000:84:00.0', label='x')
        del dev.label
        self.assertNotIn('label', dev)
        self.assertIsNone(dev.stored('label'))
        for name in ('label', 'parent_addr', 'status'):
            # Unset: oslo's error, and nothing lazy-loaded on the way.
            error = self.assertRaises(AttributeError, delattr, dev, name)
            self.assertEqual("No such attribute `%s'" % name, str(error))
            self.assertNotIn(name, dev)
        self.assertIsNone(dev.label)             # loaded when read

    def test_unknown_names(self):
        dev = objects.PciDevice()
        self.assertRaises(AttributeError, getattr, dev, 'no_such_thing')
        self.assertRaises(AttributeError, dev.obj_attr_is_set, 'nope')
        self.assertNotIn('nope', dev)

    def test_stored_values(self):
        dev = objects.PciDevice(address='0000:84:00.0', vendor_id='10de')
        self.assertEqual(('10de', '0000:84:00.0'),
                         dev.stored_values(('vendor_id', 'address')))
        self.assertEqual(('10de', None),
                         dev.stored_values(('vendor_id', 'product_id')))
        self.assertEqual(('10de',), dev.stored_values(('vendor_id',)))
        self.assertIsNone(dev.stored('product_id'))


class StrictUUIDTest(testtools.TestCase):

    def test_good_and_bad(self):
        field = fields.UUIDField()
        for good in (UUID, UUID.upper(), '{%s}' % UUID,
                     UUID.replace('-', '')):
            self.assertEqual(good, field.coerce(None, 'uuid', good))
        for bad in ('', 'NaN', '46x381', UUID + 'x', 7):
            self.assertRaises(ValueError, field.coerce, None, 'uuid', bad)
