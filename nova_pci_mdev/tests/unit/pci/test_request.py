"""Aliases and the PCI requests flavors make of them, table-driven."""

import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import instance_pci_request
from nova_pci_mdev.pci import request

VGPU = {'vendor_id': '10de', 'mdev_type': 'nvidia-35', 'name': 'vGPU'}


def table(*entries):
    return request.AliasTable.from_config(
        [e if isinstance(e, str) else json.dumps(e) for e in entries])


def problems_of(*entries):
    problems = []
    request.AliasTable.parse(
        [e if isinstance(e, str) else json.dumps(e) for e in entries],
        problems)
    return problems


class AliasTableTest(testtools.TestCase):

    GOOD = [
        # (alias entry, expected Alias fields: numa_policy, dev_type, spec)
        # No device_type: any vGPU slot of the type, mdev or NVIDIA VF.
        (VGPU, 'legacy', 'mdev-vf',
         {'vendor_id': '10de', 'mdev_type': 'nvidia-35'}),
        (dict(VGPU, device_type='mdev-vf'), 'legacy', 'mdev-vf',
         {'vendor_id': '10de', 'mdev_type': 'nvidia-35',
          'dev_type': 'mdev-vf'}),
        (dict(VGPU, mdev_type='nvidia-1150', device_type='type-VF'),
         'legacy', 'type-VF',
         {'vendor_id': '10de', 'mdev_type': 'nvidia-1150',
          'dev_type': 'type-VF'}),
        (dict(VGPU, device_type='mdev-pf'), 'legacy', 'mdev-pf',
         {'vendor_id': '10de', 'mdev_type': 'nvidia-35',
          'dev_type': 'mdev-pf'}),
        ({'name': 'qat', 'vendor_id': '8086', 'product_id': '0443',
          'device_type': 'type-PCI', 'numa_policy': 'required'},
         'required', 'type-PCI',
         {'vendor_id': '8086', 'product_id': '0443', 'dev_type': 'type-PCI'}),
        ({'name': ' nic ', 'vendor_id': '8086', 'product_id': '154C'},
         'legacy', None, {'vendor_id': '8086', 'product_id': '154c'}),
        ({'name': 'pf', 'vendor_id': '8086', 'product_id': '1572',
          'device_type': 'type-PF', 'numa_policy': 'socket'},
         'socket', 'type-PF',
         {'vendor_id': '8086', 'product_id': '1572', 'dev_type': 'type-PF'}),
        ({'name': 'v', 'vendor_id': '1af4', 'product_id': '1041',
          'device_type': 'vdpa', 'numa_policy': 'preferred'},
         'preferred', 'vdpa',
         {'vendor_id': '1af4', 'product_id': '1041', 'dev_type': 'vdpa'}),
        ({'name': 'lm', 'vendor_id': '8086', 'product_id': '154c',
          'device_type': 'type-VF', 'live_migratable': 'yes',
          'capability_type': 'pci'}, 'legacy', 'type-VF',
         {'vendor_id': '8086', 'product_id': '154c', 'dev_type': 'type-VF',
          'live_migratable': 'true'}),
        ({'name': 'rc', 'vendor_id': '8086', 'product_id': '154c',
          'resource_class': 'CUSTOM_X', 'traits': 'a,b'}, 'legacy', None,
         {'vendor_id': '8086', 'product_id': '154c'}),
    ]

    BAD = [
        # (alias entry, key named by the error)
        ({'vendor_id': '10de', 'product_id': '1eb8'}, 'name'),
        ({'name': '', 'mdev_type': 'x'}, 'name'),
        ({'name': '   ', 'mdev_type': 'x'}, 'name'),
        ({'name': 3, 'mdev_type': 'x'}, 'name'),
        ({'name': 'a:b', 'mdev_type': 'x'}, 'name'),
        ({'name': 'a,b', 'mdev_type': 'x'}, 'name'),
        ({'name': 'x' * 257, 'mdev_type': 'x'}, 'name'),
        (dict(VGPU, vendor_id='10d'), 'vendor_id'),
        (dict(VGPU, vendor_id='*'), 'vendor_id'),
        (dict(VGPU, vendor_id='010de'), 'vendor_id'),
        (dict(VGPU, product_id='xyzw'), 'product_id'),
        (dict(VGPU, numa_policy='strict'), 'numa_policy'),
        (dict(VGPU, numa_policy=None), 'numa_policy'),
        (dict(VGPU, device_type='type-XX'), 'device_type'),
        (dict(VGPU, device_type='type-PF'), 'device_type'),
        (dict(VGPU, mdev_type='../../x'), 'mdev_type'),
        (dict(VGPU, mdev_type='a/b'), 'mdev_type'),
        (dict(VGPU, mdev_type='nvidia-*'), 'mdev_type'),
        (dict(VGPU, mdev_type='nvidia-35\n'), 'mdev_type'),
        (dict(VGPU, vendor_id='10de\n'), 'vendor_id'),
        (dict(VGPU, capability_type='usb'), 'capability_type'),
        (dict(VGPU, live_migratable='perhaps'), 'live_migratable'),
        (dict(VGPU, traits=['a']), 'traits'),
        (dict(VGPU, physical_network='physnet1'), 'physical_network'),
        (dict(VGPU, devname='eth0'), 'devname'),
        (['not', 'an', 'object'], None),
        ('{"name": "vGPU"', None),
        ('{"name": "a", "name": "b"}', None),
    ]

    def test_good(self):
        for entry, policy, dev_type, spec in self.GOOD:
            t = table(entry)
            alias = t.get(entry['name'].strip())
            self.assertIsNotNone(alias, entry)
            self.assertEqual(policy, alias.numa_policy, entry)
            self.assertEqual(dev_type, alias.dev_type, entry)
            self.assertEqual((spec,), alias.specs, entry)
            for value in spec.values():
                self.assertIsInstance(value, str)

    def test_bad(self):
        for entry, key in self.BAD:
            problems = [p for p in problems_of(entry)
                        if p.severity == 'error']
            self.assertEqual(1, len(problems), (entry, problems))
            self.assertEqual(key, problems[0].kwargs['key'], entry)
            self.assertEqual('alias', problems[0].kwargs['option'])
            self.assertIn('entry 1', str(problems[0]))
            self.assertRaises(exception.ConfigErrors,
                              request.AliasTable.from_config,
                              [entry if isinstance(entry, str)
                               else json.dumps(entry)])

    def test_json_that_is_not_an_object(self):
        # null was skipped: "configuration OK" (issue 31); Nova's alias
        # schema wants an object.
        for text in ('null', '1', 'true', '"vGPU"', '[]', '[null]'):
            exc = self.assertRaises(exception.ConfigErrors,
                                    request.AliasTable.from_config, [text])
            problem, = exc.errors
            self.assertEqual('alias', problem.kwargs['option'])
            self.assertIn('entry 1', str(problem))
            self.assertIn('expected a JSON object', str(problem))

    def test_error_names_value_and_rule(self):
        problem, = problems_of(dict(VGPU, numa_policy='strict'))
        self.assertEqual(
            "[pci] alias = 'strict': entry 1, key \"numa_policy\": expected "
            "one of required, legacy, preferred, socket", str(problem))

    def test_warnings(self):
        cases = [
            ({'name': 'a', 'vendor_id': '8086'}, 'vendor_id 8086'),
            ({'name': 'a', 'product_id': '154c'}, 'product_id 154c'),
            (dict(VGPU, resource_class='CUSTOM_X'), 'ignored'),
            (dict(VGPU, traits='a'), 'ignored'),
        ]
        for entry, words in cases:
            problems = problems_of(entry)
            self.assertEqual(['warning'], [p.severity for p in problems],
                             entry)
            self.assertIsInstance(problems[0], exception.ConfigWarning)
            self.assertIn(words, str(problems[0]))
            self.assertTrue(str(problems[0]).endswith('(warning)'))
            t = table(entry)   # warnings do not stop loading
            self.assertEqual(1, len(t.warnings))

    def test_an_alias_that_narrows_nothing_is_refused(self):
        for entry in ({'name': 'a'}, {'name': 'a', 'device_type': 'type-VF'},
                      {'name': 'a', 'numa_policy': 'required',
                       'live_migratable': 'yes'}):
            problems = problems_of(entry)
            self.assertEqual(['error'], [p.severity for p in problems],
                             entry)
            self.assertIn('alias a names none of mdev_type, product_id, '
                          'vendor_id', str(problems[0]))
            self.assertIn('every whitelisted device', str(problems[0]))
            self.assertNotIn('a', request.AliasTable.parse(
                [json.dumps(entry)], []))
            self.assertRaises(exception.ConfigErrors, table, entry)

    def test_vendor_alone_or_with_an_mdev_type_is_accepted(self):
        for entry, spec in [
                ({'name': 'a', 'vendor_id': '10DE'}, {'vendor_id': '10de'}),
                ({'name': 'a', 'vendor_id': '10de', 'mdev_type': 'nvidia-35'},
                 {'vendor_id': '10de', 'mdev_type': 'nvidia-35'})]:
            self.assertEqual([], [p for p in problems_of(entry)
                                  if p.severity == 'error'], entry)
            self.assertEqual((spec,), table(entry).get('a').specs)

    def test_same_name_aliases_are_ored(self):
        t = table(VGPU, dict(VGPU, vendor_id='10df'),
                  dict(VGPU, mdev_type='nvidia-36', device_type='mdev-vf',
                       numa_policy='legacy'))
        self.assertEqual(('vGPU',), t.names())
        self.assertEqual(['nvidia-35', 'nvidia-35', 'nvidia-36'],
                         [s['mdev_type'] for s in t.get('vGPU').specs])

    def test_conflicting_same_name_aliases(self):
        qat = {'name': 'qat', 'vendor_id': '8086', 'product_id': '0443'}
        cases = [
            ((qat, dict(qat, numa_policy='required')), 'numa_policy'),
            ((dict(qat, numa_policy='required'), qat), 'numa_policy'),
            ((qat, dict(qat, device_type='type-PF')), 'device_type'),
            ((dict(qat, device_type='type-VF'),
              dict(qat, device_type='type-PF')), 'device_type'),
            ((VGPU, dict(VGPU, device_type='mdev-pf')), 'device_type'),
            ((VGPU, dict(qat, name='vGPU')), 'device_type'),
        ]
        for entries, key in cases:
            problems = problems_of(*entries)
            self.assertEqual(1, len(problems), entries)
            self.assertEqual(key, problems[0].kwargs['key'])
            self.assertIn('same-name aliases must agree', str(problems[0]))
            self.assertIn('entry 2', str(problems[0]))

    def test_every_bad_alias_is_reported(self):
        problems = problems_of(dict(VGPU, numa_policy='x'),
                               {'vendor_id': '10de'}, '{',
                               dict(VGPU, name='ok'), {'name': 'b', 'x': 1})
        self.assertEqual(4, len(problems))


class ParseAliasSpecTest(testtools.TestCase):

    def test_good(self):
        cases = [
            ('a:2', [('a', 2)]),
            ('a:2,b:1', [('a', 2), ('b', 1)]),
            (' a : 2 ,  b:1 ', [('a', 2), ('b', 1)]),
            ('vGPU:1', [('vGPU', 1)]),
            ('a:1,a:1', [('a', 1), ('a', 1)]),
            ('a:007', [('a', 7)]),
        ]
        for value, expected in cases:
            self.assertEqual(expected, request.parse_alias_spec(value))

    def test_bad(self):
        cases = [
            ('a:0', "alias a: count '0'"),
            ('a:-1', "alias a: count '-1'"),
            ('a:x', "alias a: count 'x'"),
            ('a:1.5', "alias a: count '1.5'"),
            ('a:', "alias a: count ''"),
            ('a:1:2', "alias a: count '1:2'"),
            ('a:1,b', "item 'b'"),
            ('a:1,', "item ''"),
            (':1', "item ':1'"),
            ('a', "item 'a'"),
            ('', 'NAME:COUNT'),
            (' ', 'NAME:COUNT'),
            (None, 'NAME:COUNT'),
            (3, 'NAME:COUNT'),
            ('a:１', "alias a: count '１'"),
            ('a:9999999999', "alias a: count '9999999999'"),
        ]
        for value, words in cases:
            exc = self.assertRaises(exception.InvalidExtraSpec,
                                    request.parse_alias_spec, value)
            self.assertIn(words, str(exc), value)
            self.assertIn('pci_passthrough:alias', str(exc))
            self.assertIn(repr(value), str(exc))


class RequestsFromExtraSpecsTest(testtools.TestCase):

    def test_seed_story(self):
        aliases = table(VGPU)
        reqs = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:1'}, aliases)
        self.assertEqual(1, len(reqs))
        req = reqs[0]
        self.assertIsInstance(req, instance_pci_request.InstancePCIRequest)
        self.assertEqual([{'vendor_id': '10de', 'mdev_type': 'nvidia-35'}],
                         req.spec)
        self.assertEqual(1, req.count)
        self.assertEqual('vGPU', req.alias_name)
        self.assertEqual('legacy', req.numa_policy)
        self.assertIsNotNone(req.request_id)
        self.assertEqual(instance_pci_request.InstancePCIRequest.
                         FLAVOR_ALIAS, req.source)

    def test_aliases_differing_only_in_mdev_type(self):
        aliases = table(VGPU, dict(VGPU, name='vGPU36',
                                   mdev_type='nvidia-36'))
        reqs = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:1, vGPU36:2'}, aliases)
        self.assertEqual([1, 2], [r.count for r in reqs])
        self.assertEqual(['nvidia-35', 'nvidia-36'],
                         [r.spec[0]['mdev_type'] for r in reqs])
        self.assertNotEqual(reqs[0].spec, reqs[1].spec)

    def test_same_name_aliases_make_one_request(self):
        aliases = table(VGPU, dict(VGPU, mdev_type='nvidia-36'))
        req, = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:2'}, aliases)
        self.assertEqual(2, len(req.spec))
        self.assertEqual(2, req.count)

    def test_numa_policy_flavor_wins_like_nova(self):
        cases = [
            # (alias numa_policy, flavor policy, expected)
            (None, None, 'legacy'),
            ('required', None, 'required'),
            (None, 'socket', 'socket'),
            ('required', 'preferred', 'preferred'),
            ('preferred', 'required', 'required'),
        ]
        for alias_policy, flavor_policy, expected in cases:
            entry = dict(VGPU)
            if alias_policy:
                entry['numa_policy'] = alias_policy
            specs = {'pci_passthrough:alias': 'vGPU:1'}
            if flavor_policy:
                specs['hw:pci_numa_affinity_policy'] = flavor_policy
            req, = request.requests_from_extra_specs(specs, table(entry))
            self.assertEqual(expected, req.numa_policy)

    def test_fresh_request_ids(self):
        aliases = table(VGPU)
        specs = {'pci_passthrough:alias': 'vGPU:1,vGPU:1'}
        ids = [r.request_id for r in
               request.requests_from_extra_specs(specs, aliases)]
        ids += [r.request_id for r in
                request.requests_from_extra_specs(specs, aliases)]
        self.assertEqual(4, len(set(ids)))

    def test_specs_are_copies(self):
        aliases = table(VGPU)
        req, = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:1'}, aliases)
        req.spec[0]['vendor_id'] = 'ffff'
        self.assertEqual('10de', aliases.get('vGPU').specs[0]['vendor_id'])

    def test_no_alias_no_requests(self):
        for specs in ({}, None, {'hw:numa_nodes': '2'},
                      {'hw:pci_numa_affinity_policy': 'required'}):
            self.assertEqual([], request.requests_from_extra_specs(
                specs, table(VGPU)))

    def test_unknown_alias_names_alias_and_value(self):
        exc = self.assertRaises(
            exception.InvalidAlias, request.requests_from_extra_specs,
            {'pci_passthrough:alias': 'vGPU:1,nope:2'}, table(VGPU))
        self.assertIn("'nope'", str(exc))
        self.assertIn("'vGPU:1,nope:2'", str(exc))
        self.assertIn('defined: vGPU', str(exc))

    def test_bad_policy(self):
        exc = self.assertRaises(
            exception.InvalidExtraSpec, request.requests_from_extra_specs,
            {'pci_passthrough:alias': 'vGPU:1',
             'hw:pci_numa_affinity_policy': 'strict'}, table(VGPU))
        self.assertIn('hw:pci_numa_affinity_policy', str(exc))
        self.assertIn("'strict'", str(exc))

    def test_request_survives_serialisation(self):
        req, = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:3'}, table(VGPU))
        reqs = instance_pci_request.InstancePCIRequests(
            instance_uuid='6f0d6a3e-4a8a-4f4e-9e5c-3a3c0a9b1c01',
            requests=[req])
        back = instance_pci_request.InstancePCIRequests.from_json(
            reqs.instance_uuid, reqs.to_json())
        self.assertEqual(req.spec, back.requests[0].spec)
        self.assertEqual(req.request_id, back.requests[0].request_id)


_ALIAS_VALUES = (st.none() | st.booleans() | st.integers()
                 | st.text(max_size=12)
                 | st.sampled_from(['10de', '8086', '1eb8', 'mdev-vf',
                                    'type-PF', 'required', 'socket',
                                    'nvidia-35', 'vGPU', 'pci', 'yes']))
#: JSON objects shaped like aliases: alias keys, plausible and odd values.
_ALIAS_OBJECTS = st.dictionaries(
    st.sampled_from(request.ALIAS_KEYS + ('x',)), _ALIAS_VALUES, max_size=6)
#: Aliases that are valid by construction.
_VALID_ALIASES = st.fixed_dictionaries(
    {'name': st.from_regex(r'\A[A-Za-z][A-Za-z0-9_-]{0,15}\Z')},
    optional={'vendor_id': st.from_regex(r'\A[0-9a-f]{4}\Z'),
              'product_id': st.from_regex(r'\A[0-9a-fA-F]{4}\Z'),
              'mdev_type': st.sampled_from(['nvidia-35', 'mtty-1',
                                            'i915-GVTg_V5_4']),
              'numa_policy': st.sampled_from(list(request.Policy.ALL))},
).filter(lambda e: {'vendor_id', 'product_id', 'mdev_type'} & set(e))
#: Option values: valid aliases, valid ones with a few keys changed,
#: alias-shaped objects, lists of them, and cut-off JSON.
_ALIAS_TEXT = st.one_of(
    st.builds(json.dumps, _VALID_ALIASES),
    st.builds(lambda valid, odd: json.dumps(dict(valid, **odd)),
              _VALID_ALIASES, st.dictionaries(
                  st.sampled_from(request.ALIAS_KEYS + ('x',)),
                  _ALIAS_VALUES, max_size=2)),
    st.builds(json.dumps, _ALIAS_OBJECTS),
    st.builds(json.dumps, st.lists(_ALIAS_OBJECTS, max_size=2)),
    st.builds(lambda obj, n: json.dumps(obj)[:n], _ALIAS_OBJECTS,
              st.integers(0, 60)))


class RobustnessTest(testtools.TestCase):
    """Parsers raise only project exceptions, whatever the input, and what
    they accept keeps the invariants of the module docstring."""

    def assertTableKeepsInvariants(self, table_):
        for alias in table_.aliases():
            self.assertIsInstance(alias.name, str)
            self.assertTrue(alias.name.strip())
            self.assertIn(alias.numa_policy, request.Policy.ALL)
            for spec in alias.specs:
                self.assertLessEqual(set(spec), {
                    'vendor_id', 'product_id', 'dev_type', 'mdev_type',
                    'live_migratable'})
                self.assertTrue(all(isinstance(v, str)
                                    for v in spec.values()), spec)
                self.assertTrue({'vendor_id', 'product_id',
                                 'mdev_type'} & set(spec), spec)

    @settings(max_examples=200, deadline=None, database=None)
    @given(_ALIAS_TEXT)
    def test_alias_option_values(self, text):
        try:
            table_ = request.AliasTable.from_config([text])
        except exception.ConfigErrors as exc:
            for problem in exc.errors:
                self.assertIsInstance(problem, exception.ConfigError)
                self.assertEqual(('pci', 'alias'), (
                    problem.kwargs['group'], problem.kwargs['option']))
                self.assertIn('entry 1', str(problem))
            return
        self.assertTableKeepsInvariants(table_)

    @settings(max_examples=100, deadline=None, database=None)
    @given(_VALID_ALIASES)
    def test_valid_aliases_are_accepted_as_given(self, entry):
        alias = table(entry).get(entry['name'])
        expected = {k: v.lower() for k, v in entry.items()
                    if k in ('vendor_id', 'product_id')}
        if 'mdev_type' in entry:
            expected['mdev_type'] = entry['mdev_type']
        self.assertEqual((expected,), alias.specs)
        self.assertEqual(entry.get('numa_policy', 'legacy'),
                         alias.numa_policy)

    @settings(max_examples=200, deadline=None, database=None)
    @given(st.lists(st.tuples(
        st.sampled_from(['vGPU', 'other', '', ' vGPU ']),
        st.sampled_from(['1', '3', '0', '-1', 'x', '', '1234567890'])),
        min_size=1, max_size=3),
        st.sampled_from([',', ' , ']),
        st.one_of(st.none(), st.sampled_from(['required', 'legacy', 'x'])))
    def test_extra_spec_values(self, items, sep, policy):
        value = sep.join('%s:%s' % item for item in items)
        specs = {'pci_passthrough:alias': value}
        if policy is not None:
            specs['hw:pci_numa_affinity_policy'] = policy
        # The oracle: every name defined, every count 1 to 9 digits > 0,
        # a known policy.
        ok = (policy in (None, 'required', 'legacy')
              and all(n.strip() == 'vGPU' and c.isdigit() and len(c) <= 9
                      and int(c) > 0 for n, c in items))
        try:
            reqs = request.requests_from_extra_specs(specs, table(VGPU))
        except (exception.InvalidExtraSpec, exception.InvalidAlias) as exc:
            self.assertFalse(ok, '%r refused: %s' % (value, exc))
            return
        self.assertTrue(ok, '%r accepted' % value)
        self.assertEqual([int(c) for _n, c in items],
                         [r.count for r in reqs])
        self.assertEqual([policy or 'legacy'] * len(items),
                         [r.numa_policy for r in reqs])
