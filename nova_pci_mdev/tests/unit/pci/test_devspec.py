"""Device spec parsing and matching, table-driven."""

import testtools

from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import address_spec
from nova_pci_mdev.pci import devspec
from nova_pci_mdev.pci import jsonopt
from nova_pci_mdev.tests.fixtures import devspec_world as t


def parse(entry):
    problems = []
    spec = devspec.parse_spec(entry, 0, 'entry 1',
                              lambda k, v, r: problems.append((k, v, r)))
    return spec, problems


class ParseAddressTest(testtools.TestCase):

    GOOD = [
        # (value, exact address or None, address that matches, one that
        #  does not)
        ('0000:0a:00.1', '0000:0a:00.1', '0000:0a:00.1', '0000:0a:00.2'),
        ('0:a:0.1', '0000:0a:00.1', '0000:0a:00.1', '0000:0a:00.0'),
        ('*:0a:00.*', None, '0000:0a:00.3', '0000:0b:00.3'),
        (':0a:00.', None, '0001:0a:00.7', '0001:0a:01.7'),
        ('0a:00.1', None, '0002:0a:00.1', '0002:0a:00.2'),
        ('.5', None, '0002:33:1f.5', '0002:33:1f.4'),
        ('', None, '0002:33:1f.5', t.SLOT),
        ('*', None, '0000:00:00.0', 'mtty'),
        ('mtty', 'mtty', 'mtty', 'mdpy'),
        (t.SLOT.upper(), t.SLOT, t.SLOT, '0000:00:00.0'),
        ({'domain': '.*', 'bus': '02', 'slot': '01', 'function': '[2-7]'},
         None, '0000:02:01.2', '0000:02:01.1'),
        ({'bus': '0[ab]'}, None, '0000:0b:11.0', '0000:0c:11.0'),
        ({}, None, '0000:0b:11.0', 'mtty'),
    ]

    BAD = [
        # (value, words the rule must contain)
        ('1:2:3:4.5', 'at most three'),
        ('0000:0a:00.8', 'maximum 7'),
        ('0000:0a:20.0', 'maximum 1F'),
        ('0000:100:00.0', 'maximum FF'),
        ('10000:00:00.0', 'maximum FFFF'),
        ('0000:0g:00.0', 'hex number'),
        ('0000:0a:0x.0', 'hex number'),
        ('../etc', 'hex number'),
        ('a/b', 'hex number'),
        ({'bus': '(', 'slot': '01'}, 'not a valid regex'),
        ({'bus': 2}, 'must be a string'),
        ({'bus': '02', 'device': '01'}, 'unknown address key'),
        (['0000:0a:00.0'], 'glob string or a dict'),
        (None, 'glob string or a dict'),
        ('1' * 65, 'at most 64'),
    ]

    def test_good(self):
        for value, exact, yes, no in self.GOOD:
            problems = []
            spec = address_spec.parse_address(
                value, lambda v, r: problems.append(r))
            self.assertEqual([], problems, value)
            self.assertEqual(exact, spec.exact, value)
            self.assertTrue(spec.match(yes), (value, yes))
            self.assertFalse(spec.match(no), (value, no))

    def test_bad(self):
        for value, words in self.BAD:
            problems = []
            spec = address_spec.parse_address(
                value, lambda v, r: problems.append(r))
            self.assertIsNone(spec, value)
            self.assertEqual(1, len(problems), value)
            self.assertIn(words, problems[0], value)


class ParseSpecTest(testtools.TestCase):

    def test_good_values_are_normalised(self):
        cases = [
            ({'vendor_id': '10DE'}, 'vendor_id', '10de'),
            ({'vendor_id': 'de'}, 'vendor_id', '00de'),
            ({'vendor_id': ' 10de '}, 'vendor_id', '10de'),
            ({'product_id': '*'}, 'product_id', '*'),
            ({}, 'vendor_id', '*'),
            ({'mdev_type': 'nvidia-35'}, 'mdev_type', 'nvidia-35'),
            ({'mdev_type': 'nvidia-*'}, 'mdev_type', 'nvidia-*'),
            ({'devname': 'eth0'}, 'devname', 'eth0'),
        ]
        for entry, attr, expected in cases:
            spec, problems = parse(entry)
            self.assertEqual([], problems, entry)
            self.assertEqual(expected, getattr(spec, attr), entry)

    def test_tags(self):
        cases = [
            ({'physical_network': 'physnet1'}, {'physical_network':
                                                'physnet1'}),
            ({'trusted': 'True'}, {'trusted': 'true'}),
            ({'trusted': True}, {'trusted': 'true'}),
            ({'managed': 'no'}, {'managed': 'false'}),
            ({'remote_managed': 'yes'}, {'remote_managed': 'true'}),
            ({'live_migratable': 'off'}, {'live_migratable': 'false'}),
            ({'resource_class': 'CUSTOM_X', 'vendor_id': '8086'},
             {'resource_class': 'CUSTOM_X'}),
            ({'weight': 3}, {'weight': '3'}),
        ]
        for entry, tags in cases:
            spec, problems = parse(entry)
            self.assertEqual([], problems, entry)
            self.assertEqual(tags, spec.tags)

    def test_bad_values(self):
        cases = [
            ({'vendor_id': '10dex'}, 'vendor_id'),
            ({'vendor_id': '10de0'}, 'vendor_id'),
            ({'vendor_id': ''}, 'vendor_id'),
            ({'vendor_id': 4318}, 'vendor_id'),
            ({'product_id': '0x1e'}, 'product_id'),
            ({'product_id': '1e*'}, 'product_id'),
            ({'mdev_type': '../nvidia-35'}, 'mdev_type'),
            ({'mdev_type': 'nvidia/35'}, 'mdev_type'),
            ({'mdev_type': 'nvidia/*'}, 'mdev_type'),
            ({'mdev_type': 35}, 'mdev_type'),
            ({'mdev_type': 'nvidia-35\n'}, 'mdev_type'),
            ({'mdev_type': 'nvidia-*\n'}, 'mdev_type'),
            ({'devname': 'eth0\n'}, 'devname'),
            ({'address': 'mtty\n'}, 'address'),
            ({'devname': 'eth0/../x'}, 'devname'),
            ({'devname': '..'}, 'devname'),
            ({'address': '0000:0a:00.0', 'devname': 'eth0'}, 'devname'),
            ({'trusted': 'maybe'}, 'trusted'),
            ({'dev_type': 'type-VF'}, 'dev_type'),
            ({'numa_node': '1'}, 'numa_node'),
            ({'physical_network': ['a']}, 'physical_network'),
            ({'physical_network': None}, 'physical_network'),
            ({'': 'x'}, ''),
        ]
        for entry, key in cases:
            spec, problems = parse(entry)
            self.assertIsNone(spec, entry)
            self.assertEqual(1, len(problems), (entry, problems))
            self.assertEqual(key, problems[0][0], entry)
            self.assertIn('entry 1', problems[0][2])

    def test_max_instances(self):
        """A per-parent limit (issue 27): a positive integer, only with
        mdev_type in the same entry, and no pool tag."""
        for value, expected in ((1, 1), (16, 16), ('8', 8),
                                (2 ** 31 - 1, 2 ** 31 - 1)):
            spec, problems = parse({'mdev_type': 'nvidia-35',
                                    'max_instances': value})
            self.assertEqual([], problems, value)
            self.assertEqual((expected, {}), (spec.max_instances, spec.tags))
        self.assertIsNone(parse({'mdev_type': 'x'})[0].max_instances)
        positive = 'expected a positive integer (at most 2147483647)'
        for value, shown, rule in (
                (0, '0', positive), (-2, '-2', positive),
                (2 ** 31, '2147483648', positive),
                ('x', "'x'", positive), ('', "''", positive),
                (True, 'True', positive), (1.5, '1.5', positive),
                ([2], '[2]', positive), (None, 'None', positive)):
            spec, problems = parse({'mdev_type': 'nvidia-35',
                                    'max_instances': value})
            self.assertIsNone(spec, value)
            self.assertEqual([('max_instances', shown,
                               'entry 1, key "max_instances": ' + rule)],
                             problems)
        spec, problems = parse({'vendor_id': '10de', 'max_instances': 4})
        self.assertIsNone(spec)
        self.assertEqual([('max_instances', '4', 'entry 1, key '
                           '"max_instances": needs "mdev_type" in the same '
                           'entry: it limits the mdevs of each parent the '
                           'entry covers')], problems)

    def test_every_bad_key_is_reported(self):
        spec, problems = parse({'vendor_id': 'zz', 'product_id': 'yy',
                                'mdev_type': '../x'})
        self.assertIsNone(spec)
        self.assertEqual(['vendor_id', 'product_id', 'mdev_type'],
                         [p[0] for p in problems])

    def test_not_an_object(self):
        for entry in (['x'], 'x', 3, None):
            spec, problems = parse(entry)
            self.assertIsNone(spec)
            self.assertIn('expected a JSON object', problems[0][2])

    def test_devname_resolver_turns_name_into_address(self):
        problems = []
        spec = devspec.parse_spec(
            {'devname': 'ens1f0'}, 0, 'entry 1',
            lambda *a: problems.append(a),
            devname_resolver={'ens1f0': '0000:0A:00.0'}.get)
        self.assertEqual([], problems)
        self.assertIsNone(spec.devname)
        self.assertEqual('0000:0a:00.0', spec.address.exact)
        self.assertTrue(spec.match(t.VF))

    def test_devname_resolver_bad_address(self):
        problems = []
        spec = devspec.parse_spec(
            {'devname': 'ens1f0'}, 0, 'entry 1',
            lambda *a: problems.append(a),
            devname_resolver={'ens1f0': '../x'}.get)
        self.assertIsNone(spec)
        self.assertIn('not a device address', problems[0][2])


class MatchTest(testtools.TestCase):

    CASES = [
        # (spec entry, device, expected)
        ({'vendor_id': '10de'}, t.GPU_PARENT, True),
        ({'vendor_id': '10de'}, t.GPU_SLOT, True),
        ({'vendor_id': '10DE'}, t.GPU_SLOT, True),
        ({'vendor_id': '8086'}, t.GPU_SLOT, False),
        ({'vendor_id': '10de', 'product_id': '1eb9'}, t.GPU_SLOT, False),
        ({}, t.MTTY, True),
        ({'vendor_id': '10de'}, t.MTTY_SLOT, False),
        # a parent address covers its mdev slots, globs included
        ({'address': t.GPU}, t.GPU_SLOT, True),
        ({'address': '*:84:00.*'}, t.GPU_SLOT, True),
        ({'address': {'bus': '84'}}, t.GPU_SLOT, True),
        ({'address': '*:85:00.*'}, t.GPU_SLOT, False),
        ({'address': 'mtty'}, t.MTTY_SLOT, True),
        ({'address': 'mtty'}, t.MTTY, True),
        ({'address': 'mtty'}, t.GPU_SLOT, False),
        ({'address': t.SLOT}, t.GPU_SLOT, True),
        ({'address': t.SLOT}, t.GPU_PARENT, False),
        # a PF address covers its VFs; a glob on the PF does not (Nova)
        ({'address': '0000:0a:00.0'}, t.VF, True),
        ({'address': '0000:0a:00.0'}, t.PF, True),
        ({'address': '*:0a:00.*'}, t.VF, False),
        ({'address': '*:0a:*.*'}, t.VF, True),
        ({'address': '0000:0a:02.1'}, t.PF, False),
        # mdev_type: slots of that type and parents exposing it
        ({'mdev_type': 'nvidia-35'}, t.GPU_SLOT, True),
        ({'mdev_type': 'nvidia-35'}, t.GPU_PARENT, True),
        ({'mdev_type': 'nvidia-35'}, t.GPU_SLOT_36, False),
        ({'mdev_type': 'nvidia-3?'}, t.GPU_SLOT_36, True),
        ({'mdev_type': 'nvidia-*'}, t.MTTY_SLOT, False),
        ({'mdev_type': 'NVIDIA-35'}, t.GPU_SLOT, False),
        ({'mdev_type': 'nvidia-35'}, t.NIC, False),
        ({'mdev_type': '*'}, t.NIC, False),
        # devname needs the device to carry it
        ({'devname': 'eth0'}, t.NIC, False),
        ({'devname': 'eth0'}, dict(t.NIC, extra_info={'devname': 'eth0'}),
         True),
        ({'devname': 'eth0'}, dict(t.NIC, devname='eth0'), True),
    ]

    def test_records(self):
        for entry, dev, expected in self.CASES:
            spec, problems = parse(entry)
            self.assertEqual([], problems)
            self.assertEqual(expected, spec.match(dev), (entry, dev))

    def test_pci_device_objects(self):
        for entry, dev, expected in self.CASES:
            if 'devname' in dev:
                continue   # not a PciDevice field
            obj = pci_device.PciDevice.create(dev)
            spec, _ = parse(entry)
            self.assertEqual(expected, spec.match(obj), (entry, dev))

    def test_device_with_unset_fields(self):
        obj = pci_device.PciDevice(address=t.GPU)
        spec, _ = parse({'mdev_type': 'nvidia-35'})
        self.assertFalse(spec.match(obj))
        spec, _ = parse({'address': t.GPU})
        self.assertTrue(spec.match(obj))


class HelpersTest(testtools.TestCase):

    def test_load_json(self):
        problems = []
        report = lambda v, r: problems.append(r)  # noqa: E731
        self.assertEqual({'a': 1}, jsonopt.load_json('{"a": 1}', report))
        for text in ('{"a": 1, "a": 2}', '{"a": ', '[' * 100000, None):
            self.assertIs(jsonopt.INVALID, jsonopt.load_json(text, report))
        # JSON null is a value (the callers refuse it), not a failure.
        self.assertIsNone(jsonopt.load_json('null', report))
        self.assertEqual(4, len(problems))
        self.assertIn('appears twice', problems[0])
        self.assertIn('malformed JSON', problems[1])

    def test_parse_bool_tag(self):
        for good, expected in (('YES', 'true'), ('0', 'false'),
                               (False, 'false'), ('on', 'true')):
            self.assertEqual(expected, devspec.parse_bool_tag(good))
        for bad in ('maybe', '', None, 1):
            self.assertRaises(ValueError, devspec.parse_bool_tag, bad)

    def test_show_truncates(self):
        self.assertEqual(203, len(jsonopt.show('x' * 500)))
        self.assertEqual("'ab'", jsonopt.show('ab'))
