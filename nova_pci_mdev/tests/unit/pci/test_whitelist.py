"""The whitelist: parsing every entry, first-match order and indexing."""

import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.pci import address_spec
from nova_pci_mdev.pci import devspec
from nova_pci_mdev.pci import whitelist
from nova_pci_mdev.tests.fixtures import devspec_world as t

objects.register_all()


def wl(*entries):
    return whitelist.Whitelist.from_config(
        [e if isinstance(e, str) else json.dumps(e) for e in entries])


class FromConfigTest(testtools.TestCase):

    def test_empty_whitelist_assigns_nothing(self):
        for values in ([], None):
            self.assertIsNone(
                whitelist.Whitelist.from_config(values).match(t.GPU_SLOT))

    def test_object_and_list_entries(self):
        w = wl({'vendor_id': '10de'},
               [{'vendor_id': '8086', 'product_id': '1572'},
                {'vendor_id': '8086', 'product_id': '154c'}])
        self.assertEqual(3, len(w.specs))
        self.assertEqual([0, 1, 2], [s.position for s in w.specs])

    def test_json_that_is_neither_object_nor_list_of_objects(self):
        # null was skipped: "configuration OK: 0 device spec(s)" (issue
        # 31); Nova refuses it ("Expecting list or dict").
        for text, rule in (('null', 'expected a JSON object or a list'),
                           ('1', 'expected a JSON object or a list'),
                           ('false', 'expected a JSON object or a list'),
                           ('"10de"', 'expected a JSON object or a list'),
                           ('[null]', 'entry 1.1: expected a JSON object'),
                           ('[{}, 2]', 'entry 1.2: expected a JSON object')):
            exc = self.assertRaises(exception.ConfigErrors,
                                    whitelist.Whitelist.from_config, [text])
            problem, = exc.errors
            self.assertEqual(('pci', 'device_spec'),
                             (problem.kwargs['group'],
                              problem.kwargs['option']))
            self.assertIn(rule, str(problem))

    def test_a_single_string_is_one_value(self):
        w = whitelist.Whitelist.from_config('{"vendor_id": "10de"}')
        self.assertEqual(1, len(w.specs))

    def test_every_bad_entry_is_reported(self):
        values = ['{"vendor_id": "10de"', '"just a string"',
                  json.dumps([{'vendor_id': 'x'}, {'product_id': '1'},
                              {'address': '0000:0a:00.9'}]),
                  json.dumps({'vendor_id': '10de'}),
                  json.dumps({'address': '0000:0a:00.0',
                              'devname': 'eth0'})]
        exc = self.assertRaises(exception.ConfigErrors,
                                whitelist.Whitelist.from_config, values)
        self.assertEqual(5, len(exc.errors))
        for err in exc.errors:
            self.assertIsInstance(err, exception.ConfigError)
            self.assertEqual('pci', err.kwargs['group'])
            self.assertEqual('device_spec', err.kwargs['option'])
        text = [str(e) for e in exc.errors]
        self.assertIn('entry 1: malformed JSON', text[0])
        self.assertIn('entry 2: expected a JSON object or a list', text[1])
        self.assertIn("[pci] device_spec = 'x': entry 3.1, key "
                      '"vendor_id"', text[2])
        self.assertIn('entry 3.3, key "address"', text[3])
        self.assertIn('devname and address', text[4])

    def test_parse_keeps_good_entries(self):
        problems = []
        w = whitelist.Whitelist.parse(
            ['{"vendor_id": "zz"}', '{"vendor_id": "10de"}'], problems)
        self.assertEqual(1, len(problems))
        self.assertEqual(['10de'], [s.vendor_id for s in w.specs])


class MatchTest(testtools.TestCase):

    def test_first_spec_in_config_order_gives_the_tags(self):
        w = wl({'address': '*:84:*.*', 'tag': 'glob'},
               {'vendor_id': '10de', 'tag': 'vendor'},
               {'address': t.GPU, 'tag': 'exact'})
        self.assertEqual({'tag': 'glob'}, w.match(t.GPU_SLOT).tags)
        w = wl({'vendor_id': '10de', 'tag': 'vendor'},
               {'address': t.GPU, 'tag': 'exact'})
        self.assertEqual({'tag': 'vendor'}, w.match(t.GPU_SLOT).tags)
        w = wl({'address': t.GPU, 'tag': 'exact'},
               {'vendor_id': '10de', 'tag': 'vendor'})
        self.assertEqual({'tag': 'exact'}, w.match(t.GPU_SLOT).tags)

    def test_later_spec_matches_when_earlier_does_not(self):
        w = wl({'vendor_id': '10de', 'mdev_type': 'nvidia-36', 'n': '1'},
               {'vendor_id': '10de', 'n': '2'})
        self.assertEqual('2', w.match(t.GPU_SLOT).tags['n'])
        self.assertEqual('1', w.match(t.GPU_SLOT_36).tags['n'])

    def test_seed_story_whitelist(self):
        w = wl({'vendor_id': '10de'})
        for dev in (t.GPU_PARENT, t.GPU_SLOT, t.GPU_SLOT_36):
            self.assertIsNotNone(w.match(dev))
        for dev in (t.PF, t.VF, t.NIC, t.MTTY, t.MTTY_SLOT):
            self.assertIsNone(w.match(dev))

    def test_matching_and_unmatched(self):
        w = wl({'vendor_id': '10de'}, {'mdev_type': 'nvidia-35'},
               {'vendor_id': 'dead'})
        self.assertEqual([0, 1], [s.position for s in
                                  w.matching(t.GPU_SLOT)])
        self.assertEqual([2], [s.position for s in
                               w.unmatched([t.GPU_SLOT, t.NIC])])

    def test_a_remembered_answer_never_serves_another_record(self):
        w = wl({'vendor_id': '10de'}, {'product_id': '10fb'})
        named = dict(t.NIC, extra_info={'devname': 'eth0'})
        self.assertEqual(1, w.match(named).position)
        # extra_info that is no dict fails as on a fresh whitelist, though
        # a record with the same ids and devname was answered before.
        odd = dict(t.NIC, extra_info='eth0')
        self.assertRaises(AttributeError, wl({'vendor_id': '10de'}).match,
                          odd)
        self.assertRaises(AttributeError, w.match, odd)
        # An unhashable value is answered, every time, not remembered.
        listed = dict(t.NIC, devname=['eth0'])
        for _ in range(2):
            self.assertEqual(1, w.match(listed).position)
            self.assertEqual([1], [s.position for s in w.matching(listed)])

    def test_exact_specs_are_looked_up_not_scanned(self):
        calls = []

        class Counting(devspec.DevSpec):
            def match(self, dev):
                calls.append(self.position)
                return super().match(dev)

        specs = [Counting(position=i, address=address_spec.ExactAddress(
            '0000:%02x:%02x.0' % (i // 32, i % 32))) for i in range(2000)]
        specs += [Counting(position=2000 + i, vendor_id='%04x' % i,
                           product_id='0001') for i in range(2000)]
        w = whitelist.Whitelist(specs)
        self.assertEqual(40, w.match(dict(t.NIC, address='0000:01:08.0')
                                     ).position)
        self.assertEqual([40], calls)
        del calls[:]
        dev = dict(t.NIC, address='0000:ff:00.0', vendor_id='0007',
                   product_id='0001')
        self.assertEqual(2007, w.match(dev).position)
        self.assertEqual([2007], calls)


# -- property: the index gives the same answer as a linear first match ------

_ENTRIES = st.fixed_dictionaries({}, optional={
    'vendor_id': st.sampled_from(['10de', '8086', '*']),
    'product_id': st.sampled_from(['1eb8', '1572', '154c', '*']),
    'address': st.sampled_from([t.GPU, '0000:0a:00.0', '*:0a:*.*', 'mtty',
                                t.SLOT, {'bus': '8.'}]),
    'mdev_type': st.sampled_from(['nvidia-35', 'nvidia-*', 'mtty-1']),
})
_DEVICES = [t.GPU_PARENT, t.GPU_SLOT, t.GPU_SLOT_36, t.PF, t.VF, t.NIC,
            t.MTTY, t.MTTY_SLOT,
            # Ids as a hypervisor may spell them (remembered per spelling,
            # answered as the lower-case ones), with a devname,
            dict(t.GPU_SLOT, vendor_id='10DE', product_id='1EB8'),
            dict(t.VF, product_id='154C', extra_info={'devname': 'eth1'}),
            # and without a key the answer is not remembered by.
            dict({k: v for k, v in t.NIC.items() if k != 'mdev_type'},
                 devname='eth0')]


class IndexPropertyTest(testtools.TestCase):

    @settings(max_examples=100, deadline=None, database=None)
    @given(st.lists(_ENTRIES, max_size=8), st.randoms())
    def test_index_equals_linear_scan(self, entries, rnd):
        w = wl(*entries)
        # Twice, and as PciDevices too: without address specs, match()
        # remembers its answers by what such specs read.
        devices = _DEVICES + [objects.PciDevice.create(d) for d in _DEVICES]
        for dev in rnd.sample(devices, len(devices)) * 2:
            linear = next((s for s in w.specs if s.match(dev)), None)
            self.assertIs(linear, w.match(dev))
            self.assertEqual([s for s in w.specs if s.match(dev)],
                             w.matching(dev))


_SPEC_VALUES = (st.none() | st.booleans() | st.integers()
                | st.text(max_size=10)
                | st.sampled_from(['10de', '8086', '*', '0000:84:00.0',
                                   '*:0a:*.*', 'mtty', 'nvidia-*',
                                   'nvidia-35', 'eth0', 'yes']))
#: JSON values shaped like device specs: objects with spec keys (address
#: regex dicts among them) and lists of such objects.
_SPEC_JSON = st.recursive(
    _SPEC_VALUES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(['vendor_id', 'product_id', 'address',
                         'devname', 'mdev_type', 'domain', 'bus',
                         'trusted', 'physical_network', 'x']),
        children, max_size=4), max_leaves=12)
#: Option values: valid entries (``_ENTRIES``), such JSON, cut-off JSON.
_SPEC_TEXT = st.one_of(
    st.builds(json.dumps, _ENTRIES),
    st.builds(json.dumps, _SPEC_JSON),
    st.builds(lambda data, n: json.dumps(data)[:n], _SPEC_JSON,
              st.integers(0, 60)))


class RobustnessTest(testtools.TestCase):
    """Parsing raises only ConfigErrors naming the option; what it accepts
    keeps the DevSpec invariants and matches as a linear scan would."""

    def assertWhitelistKeepsInvariants(self, w):
        for spec in w.specs:
            for value in (spec.vendor_id, spec.product_id):
                self.assertTrue(value == devspec.ANY or (
                    len(value) == 4 and value == value.lower()), spec)
            self.assertTrue(all(isinstance(k, str) and isinstance(v, str)
                                for k, v in spec.tags.items()), spec)
        for dev in _DEVICES:
            linear = next((s for s in w.specs if s.match(dev)), None)
            self.assertIs(linear, w.match(dev))

    @settings(max_examples=200, deadline=None, database=None)
    @given(_SPEC_TEXT)
    def test_option_values(self, text):
        try:
            w = whitelist.Whitelist.from_config([text])
        except exception.ConfigErrors as exc:
            for problem in exc.errors:
                self.assertIsInstance(problem, exception.ConfigError)
                self.assertEqual(('pci', 'device_spec'), (
                    problem.kwargs['group'], problem.kwargs['option']))
            return
        self.assertWhitelistKeepsInvariants(w)

    @settings(max_examples=100, deadline=None, database=None)
    @given(st.lists(_ENTRIES, min_size=1, max_size=4))
    def test_valid_entries_are_all_kept_in_order(self, entries):
        w = wl(*entries)
        self.assertEqual(len(entries), len(w.specs))
        self.assertEqual([json.dumps(e, sort_keys=True) for e in entries],
                         [s.source for s in w.specs])
        self.assertWhitelistKeepsInvariants(w)
