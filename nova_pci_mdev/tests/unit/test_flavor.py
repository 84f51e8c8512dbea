"""Flavor extra specs: alias requests, hw:numa_nodes and resources groups."""

import json

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.compute import flavor
from nova_pci_mdev.pci import request

VGPU = {'vendor_id': '10de', 'mdev_type': 'nvidia-35', 'name': 'vGPU'}


def parse(specs):
    return flavor.parse(specs, request.AliasTable.from_config(
        [json.dumps(VGPU)]))


class FlavorParseTest(testtools.TestCase):

    def test_alias_and_resources_together(self):
        found = parse({'pci_passthrough:alias': 'vGPU:2',
                       'hw:numa_nodes': ' 2 ',
                       'resources:VGPU': '1',
                       'resources1:CUSTOM_NVIDIA_35': '2',
                       'resources_g:CUSTOM_NVIDIA_35': '1',
                       'resources2:VCPU': '0',
                       'group_policy': 'none',
                       'hw:cpu_policy': 'dedicated'})
        self.assertEqual(1, len(found.pci_requests))
        self.assertEqual(2, found.pci_requests[0].count)
        self.assertEqual(2, found.numa_nodes)
        # A zero amount asks for nothing, as in Nova.
        self.assertEqual({'': {'VGPU': 1}, '1': {'CUSTOM_NVIDIA_35': 2},
                          '_g': {'CUSTOM_NVIDIA_35': 1}},
                         found.resource_groups)
        self.assertEqual({'VGPU': 1, 'CUSTOM_NVIDIA_35': 3},
                         found.resources)

    def test_group_policy(self):
        # Placement refuses two numbered groups without a group_policy:
        # so does the flavor (issue 15, item 10).
        two = {'resources1:VGPU': '1', 'resources2:CUSTOM_MLX5': '1'}
        err = self.assertRaises(exception.InvalidExtraSpec, parse, two)
        self.assertIn('group_policy', str(err))
        self.assertIn('resources1:, resources2:', str(err))
        err = self.assertRaises(exception.InvalidExtraSpec, parse,
                                dict(two, group_policy='isolated'))
        self.assertIn('expected one of none, isolate', str(err))
        self.assertEqual('isolate',
                         parse(dict(two, group_policy=' isolate ')
                               ).group_policy)
        # One numbered group (and the unnumbered one) needs none.
        self.assertIsNone(parse({'resources1:VGPU': '1',
                                 'resources:VGPU': '1'}).group_policy)

    def test_nothing_asked(self):
        found = parse({'hw:mem_page_size': 'large'})
        self.assertEqual((), found.pci_requests)
        self.assertIsNone(found.numa_nodes)
        self.assertEqual({}, found.resources)

    def test_bad_amounts_name_key_value_and_rule(self):
        # int() alone would take '1_0', '+1' and non-ASCII digits.
        for key in ('resources:VGPU', 'resources3:CUSTOM_X'):
            for value in ('-1', 'one', '1_0', '+1', '\u0661', '1.0', '',
                          '1234567890', None):
                exc = self.assertRaises(exception.InvalidExtraSpec, parse,
                                        {key: value})
                self.assertIn(key, str(exc))
                self.assertIn(repr(value).strip("'"), str(exc))
                self.assertIn('non-negative integer', str(exc))

    def test_bad_numa_nodes(self):
        for value in ('0', '-2', 'two', '1_0', '\u0662', ''):
            exc = self.assertRaises(exception.InvalidExtraSpec, parse,
                                    {'hw:numa_nodes': value})
            self.assertIn('hw:numa_nodes', str(exc))
            self.assertIn('positive integer', str(exc))

    def test_bad_resource_class(self):
        exc = self.assertRaises(exception.InvalidExtraSpec, parse,
                                {'resources:custom_vgpu': '1'})
        self.assertIn('custom_vgpu', str(exc))
        self.assertIn('upper case', str(exc))

    def test_unknown_alias(self):
        self.assertRaises(exception.Invalid, parse,
                          {'pci_passthrough:alias': 'nope:1'})


class TraitSpecTest(testtools.TestCase):
    """``trait[N]:<TRAIT>`` (issue 31): Nova's flavor validation accepts
    ``required`` and ``forbidden`` only; before, any value was accepted
    and every trait ignored."""

    def test_required_and_forbidden_per_group(self):
        found = parse({'resources:VGPU': '1', 'resources1:CUSTOM_MLX5': '1',
                       'trait:CUSTOM_MDEV_TYPE_NVIDIA_35': 'required',
                       'trait:HW_CPU_X86_AVX2': ' required ',
                       'trait:CUSTOM_MDEV_TYPE_NVIDIA_36': 'forbidden',
                       'trait1:CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL': 'required'})
        self.assertEqual({
            '': flavor.Traits(
                required=frozenset(('CUSTOM_MDEV_TYPE_NVIDIA_35',
                                    'HW_CPU_X86_AVX2')),
                forbidden=frozenset(('CUSTOM_MDEV_TYPE_NVIDIA_36',))),
            '1': flavor.Traits(required=frozenset(
                ('CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL',)))},
            found.trait_groups)
        # The unnumbered group may have traits without resources of ours
        # (in Nova it always asks the compute node's VCPU...).
        self.assertEqual({'': flavor.Traits(required=frozenset(
            ('COMPUTE_X',)))}, parse({'trait:COMPUTE_X': 'required'}
                                     ).trait_groups)

    def test_refused_naming_key_value_and_rule(self):
        for key, value, rule in (
                ('trait:CUSTOM_X', 'maybe', 'expected required'),
                ('trait:CUSTOM_X', 'Required', 'expected required'),
                ('trait:CUSTOM_X', '', 'expected required'),
                ('trait:CUSTOM_X', None, 'expected required'),
                ('trait:custom_x', 'required', 'upper case letters'),
                ('trait:', 'required', 'upper case letters'),
                ('trait:CUSTOM_X/..', 'required', 'upper case letters'),
                ('trait:C' + 'X' * 255, 'required', 'at most 255'),
                ('trait2:CUSTOM_X', 'required',
                 'request group 2 asks for no resources'),
                ('traits:CUSTOM_X', 'required',
                 'request group s asks for no resources')):
            exc = self.assertRaises(
                exception.InvalidExtraSpec, parse,
                {'resources:VGPU': '1', key: value})
            self.assertIn(key, str(exc))
            self.assertIn(repr(value), str(exc))
            self.assertIn(rule, str(exc))
