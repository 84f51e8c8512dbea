"""objects.bulk (Maker, Shapes, random UUIDs) and the plain setters of
objects.base, pinned to oslo.versionedobjects' own construction.

Each builder must give the object ``PciDevice(**values)`` gives: the same
``obj_to_primitive`` (so the same stored values, coerced by each field),
the same changed fields, the same instance attributes, and no mutable
value shared with another object.
"""

import uuid

import testtools

from nova_pci_mdev import objects
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import bulk
from nova_pci_mdev.objects import fields

objects.register_all()

UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'
#: Every field kind a record fills: strings, an enum, an int given as
#: text, nullable fields given None, an address that normalises, a dict.
RECORDS = [
    {'address': '0000:84:00.0', 'vendor_id': '10de', 'product_id': '1EB8',
     'dev_type': 'mdev-pf', 'numa_node': '1', 'parent_addr': None,
     'mdev_type': 'nvidia-35', 'label': 'label_10de_1eb8',
     'dev_id': 'pci_0000_84_00_0', 'extra_info': {'creatable': '4'}},
    {'address': '0000:84:00.1', 'vendor_id': '10de', 'product_id': '1EB8',
     'dev_type': 'mdev-pf', 'numa_node': '1', 'parent_addr': None,
     'mdev_type': 'nvidia-35', 'label': 'label_10de_1eb8',
     'dev_id': 'pci_0000_84_00_1', 'extra_info': {'creatable': '4'}},
    {'address': '0000:85:00.1', 'vendor_id': '8086', 'product_id': '154c',
     'dev_type': 'type-VF', 'numa_node': None, 'parent_addr': '0000:85:00.0',
     'mdev_type': None, 'label': None, 'dev_id': None, 'extra_info': {}},
    {'address': '0000:85:00.2', 'vendor_id': '8086', 'product_id': '154c',
     'dev_type': 'type-VF', 'numa_node': 0, 'parent_addr': '0000:85:00.0',
     'dev_id': 'pci_0000_85_00_2', 'capabilities': {'a': [1]},
     'phys_function': '0000:85:00.0'},
    {'address': 'A3B2C1D0-0000-4000-8000-000000000001', 'vendor_id': '10de',
     'product_id': '1eb8', 'dev_type': 'mdev-vf', 'numa_node': 1,
     'parent_addr': '0000:84:00.0', 'mdev_type': 'nvidia-35',
     'label': 'label_10de_1eb8', 'dev_id': None,
     'extra_info': {'mdev_exists': 'true', 'mdev_exposed': 'true'}},
]


def _oslo(record):
    """The device oslo's constructor gives for ``record`` (same mapping
    as PciDevice.maker: non-field keys into extra_info, as JSON when not
    strings)."""
    import json
    values = {'mdev_type': None, 'parent_addr': None, 'numa_node': None,
              'status': 'available', 'instance_uuid': None,
              'request_id': None, 'uuid': UUID}
    extra = {}
    for key, value in record.items():
        if key in objects.PciDevice.fields:
            if key != 'extra_info':
                values[key] = value
        else:
            extra[key] = value if isinstance(value, str) else (
                json.dumps(value))
    extra.update(record.get('extra_info') or {})
    values['extra_info'] = extra
    return objects.PciDevice(**values)


def _primitive(dev):
    primitive = dev.obj_to_primitive()
    primitive['nova_object.changes'].sort()
    return primitive


class MakerTest(testtools.TestCase):

    def test_every_record_as_oslo_builds_it(self):
        make = objects.PciDevice.maker()
        for _ in range(2):      # the second round from the remembered shapes
            for record in RECORDS:
                dev = make(dict(record))
                want = _oslo(record)
                self.assertEqual(want.obj_what_changed(),
                                 dev.obj_what_changed(), record)
                dev.uuid = UUID
                self.assertEqual(_primitive(want), _primitive(dev), record)
                self.assertEqual(set(vars(want)), set(vars(dev)), record)
                self.assertIsInstance(dev, objects.PciDevice)

    def test_no_mutable_value_is_shared(self):
        make = objects.PciDevice.maker()
        one, two = make(RECORDS[0]), make(RECORDS[0])
        two_changed = set(two._changed_fields)
        for name in ('extra_info', '_changed_fields', 'child_devices'):
            self.assertIsNot(getattr(one, name), getattr(two, name), name)
        one.extra_info['creatable'] = '0'
        one.child_devices.append(two)
        one.status = 'claimed'
        self.assertEqual('4', two.extra_info['creatable'])
        self.assertEqual([], two.child_devices)
        one.obj_reset_changes()
        self.assertEqual(two_changed, two._changed_fields)
        self.assertEqual('available', two.status)
        self.assertNotEqual(one.uuid, two.uuid)

    def test_a_shape_is_exact_about_types(self):
        make = objects.PciDevice.maker()
        # 1, 1.0 and True are equal in Python; as extra values they are
        # not the same JSON text.
        got = [make(dict(RECORDS[0], weight=value)).extra_info['weight']
               for value in (1, 1.0, True, '1')]
        self.assertEqual(['1', '1.0', 'true', '1'], got)

    def test_unique_values_are_coerced_per_object(self):
        make = objects.PciDevice.maker()
        make(RECORDS[2])
        for name, value in (('parent_addr', '../x'), ('address', '../x')):
            bad = dict(RECORDS[2], **{name: value})
            self.assertRaises(ValueError, make, bad)
            self.assertRaises(ValueError, make, bad)
        dev = make(dict(RECORDS[2], parent_addr='0000:85:00.0'.upper()))
        self.assertEqual('0000:85:00.0', dev.parent_addr)

    def test_a_bad_shaped_value_fails_each_time(self):
        make = objects.PciDevice.maker()
        make(RECORDS[0])
        for name, value in (('dev_type', 'type-X'), ('numa_node', 'one'),
                            ('mdev_type', '../x'),
                            ('extra_info', {'k': ['not', 'a', 'string']}),
                            ('extra_info', 'not a dict')):
            bad = dict(RECORDS[0], **{name: value})
            self.assertRaises((ValueError, TypeError), make, bad)
            self.assertRaises((ValueError, TypeError), make, bad)

    def test_a_long_lived_maker_remembers_a_bounded_number_of_values(self):
        maker = bulk.Maker(objects.PciDevice)
        template = maker.template({'vendor_id': '10de'})
        for i in range(bulk._MEMO_MOST + 100):
            dev = maker.build(template, source={
                'address': '00000000-0000-4000-8000-%012x' % i},
                names=('address',))
        self.assertEqual('00000000-0000-4000-8000-%012x' % i, dev.address)
        self.assertEqual(bulk._MEMO_MOST, len(maker._fields['address'][2]))

    def test_a_constructor_that_fills_containers_is_called_each_time(self):

        @base.NovaPciMdevObjectRegistry.register_if(False)
        class Busy(base.NovaPciMdevObject):
            fields = {'name': fields.StringField()}

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.seen = ['made']

        maker = bulk.Maker(Busy)
        self.assertIsNone(maker._new)
        template = maker.template({'name': 'a'})
        one, two = maker.build(template), maker.build(template)
        self.assertEqual(['made'], one.seen)
        self.assertIsNot(one.seen, two.seen)
        self.assertEqual('a', two.name)
        self.assertEqual({'name'}, two.obj_what_changed())


class SharedChangesTest(testtools.TestCase):
    """Objects made from one template share the frozenset of their
    changed fields until one of them reads or writes its own
    ``_changed_fields``; oslo's setters and resets see a plain set."""

    def setUp(self):
        super().setUp()
        make = objects.PciDevice.maker()
        self.one, self.two = make(RECORDS[0]), make(RECORDS[1])
        self.all = _oslo(RECORDS[0]).obj_what_changed()

    def test_shared_until_touched(self):
        one, two = vars(self.one), vars(self.two)
        self.assertNotIn('_changed_fields', one)
        self.assertIs(one[base.SHARED_CHANGES], two[base.SHARED_CHANGES])
        self.assertEqual(self.all, self.one.obj_what_changed())
        self.assertNotIn('_changed_fields', one)    # reading built nothing
        self.one.obj_reset_changes()
        self.one.status = 'claimed'
        self.assertEqual({'status'}, self.one.obj_what_changed())
        self.assertNotIn(base.SHARED_CHANGES, one)
        self.assertEqual(self.all, self.two.obj_what_changed())

    def test_the_set_of_its_own_starts_from_the_shared_one(self):
        changed = self.one._changed_fields
        self.assertIsInstance(changed, set)
        self.assertEqual(self.all, changed)
        self.assertNotIn(base.SHARED_CHANGES, vars(self.one))
        changed.discard('label')
        self.assertEqual(self.all - {'label'}, self.one.obj_what_changed())
        self.assertEqual(self.all, self.two.obj_what_changed())

    def test_resets_as_oslo(self):
        self.one.obj_reset_changes(['label', 'status'])
        self.assertEqual(self.all - {'label', 'status'},
                         self.one.obj_what_changed())
        self.two.obj_reset_changes()
        self.assertEqual(set(), self.two.obj_what_changed())
        self.assertEqual({}, {k: v for k, v in vars(self.two).items()
                              if k in ('_changed_fields',
                                       base.SHARED_CHANGES) and v})
        self.two.obj_reset_changes(recursive=True)
        self.assertEqual(set(), self.two.obj_what_changed())

    def test_copies_and_primitives_carry_the_changes(self):
        clone = self.one.obj_clone()
        self.assertEqual(self.all, clone.obj_what_changed())
        back = objects.PciDevice.obj_from_primitive(
            self.one.obj_to_primitive())
        self.assertEqual(self.all, back.obj_what_changed())


class RandomUUIDTest(testtools.TestCase):

    def test_version_4_canonical_and_distinct(self):
        next_uuid = bulk.random_uuids(most=8)
        got = [next_uuid() for _ in range(100)]
        self.assertEqual(100, len(set(got)))
        for text in got:
            parsed = uuid.UUID(text)
            self.assertEqual(str(parsed), text)
            self.assertEqual(4, parsed.version)
            self.assertEqual(uuid.RFC_4122, parsed.variant)


class PlainSetterTest(testtools.TestCase):
    """The setters of string and enum fields skip oslo's Python layers
    only for values oslo's setter would store unchanged."""

    VALUES = ('available', 'claimed', 'busy', '', 'x' * 3, None, 1, 1.5,
              True, UUID)

    def _set(self, setter, name, value):
        dev = objects.PciDevice()
        dev.obj_reset_changes()
        try:
            setter(dev, value)
        except Exception as e:
            return type(e)
        return (dev.stored(name, 'unset'), type(dev.stored(name)),
                dev.obj_what_changed())

    def test_same_result_as_oslo_for_every_string_and_enum_field(self):
        checked = 0
        for name, field in objects.PciDevice.fields.items():
            fset = getattr(objects.PciDevice, name).fset
            oslo = getattr(fset, 'oslo_setter', None)
            if oslo is None:
                continue
            checked += 1
            for value in self.VALUES:
                self.assertEqual(self._set(oslo, name, value),
                                 self._set(fset, name, value),
                                 (name, value))
        # status, dev_type, vendor_id, product_id, dev_id, label,
        # instance_uuid, request_id.
        self.assertEqual(8, checked)

    def test_other_fields_keep_oslos_setter(self):
        for name in ('numa_node', 'address', 'uuid', 'extra_info'):
            fset = getattr(objects.PciDevice, name).fset
            self.assertFalse(hasattr(fset, 'oslo_setter'), name)
