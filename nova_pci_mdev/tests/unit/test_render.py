"""render: the streamed forms give the text of the whole-value forms."""

import io

import testtools

from nova_pci_mdev import objects
from nova_pci_mdev.cmd import render

objects.register_all()


class StreamTest(testtools.TestCase):

    def test_json_list_is_to_json_of_the_list(self):
        for items in ([], [{}], [{'b': [1, {'c': None}], 'a': 'x'}],
                      [{'k': i, 'nested': {'z': [i] * i}} for i in range(4)],
                      [{'f': 1.5, 'n': float('nan'), 't': True, 'u': 'é\u2028"',
                        'e': {}, 'l': [], 'i': -3, 'x': {1: 'int key'},
                        'fa': False, 'tu': (1, 'a'), 'big': 2 ** 70}],
                      ['plain', 3, None, [[]], [{'a': [{}]}]]):
            out = io.StringIO()
            render.write_json_list(out, iter(items))
            self.assertEqual(render.to_json(items) + '\n', out.getvalue())

    def test_device_tree_lines(self):
        gpu = objects.PciDevice.create({
            'address': '0000:84:00.0', 'vendor_id': '10de',
            'product_id': '1eb8', 'dev_type': 'mdev-pf', 'numa_node': 1,
            'mdev_type': 'nvidia-35'})
        slot = objects.PciDevice.create({
            'address': '4b20d080-1b54-4048-85b3-a6a62d165c01',
            'vendor_id': '10de', 'product_id': '1eb8', 'dev_type': 'mdev-vf',
            'numa_node': 1, 'parent_addr': '0000:84:00.0',
            'mdev_type': 'nvidia-35', 'extra_info': {'mdev_exists': 'false'}})
        lines = list(render.device_tree_lines([slot, gpu]))
        self.assertEqual('\n'.join(lines), render.device_tree([slot, gpu]))
        self.assertEqual('NUMA node 1', lines[0])
        self.assertIn('1 available nvidia-35 slot(s)', lines[-1])
