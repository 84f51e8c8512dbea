"""The console script on a host of A100-like SR-IOV GPUs (issue 27).

:mod:`~nova_pci_mdev.tests.fixtures.sriov_gpu_host` writes the host file
for libvirt's real test driver: 8 PFs (10de:20b5) of 16 VFs each, every VF
an mdev parent of one nvidia-699 instance (three levels), on NUMA nodes 0
and 1 alternately. ``inventory`` shows one provider per GPU (8 of 16, named
after the PFs), as the Nova series reports them, not one per VF parent
(128 of 1). The claim and refusal tests rewrite it with 2 GPUs.
"""

import testtools

from benchmarks import placement_trees
from nova_pci_mdev.tests.fixtures import cli as cli_fixture
from nova_pci_mdev.tests.fixtures import sriov_gpu_host as gpu_host

INSTANCE = cli_fixture.INSTANCE
OTHER = '8d2f1b3c-1e4a-4b5c-9d6e-7f8091a2b3c4'
WHOLE = '9e3a2c4d-2f5b-4c6d-8e7f-8091a2b3c4d5'


class TestSriovGpuHost(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cli = self.useFixture(cli_fixture.CliFixture())
        self.uri, self.conf = gpu_host.write(self.cli.tmp)

    def run_cli(self, *args, expect=0, conf=None):
        return self.cli.run('--connection', self.uri, '--config-file',
                            conf or self.conf, *args, expect=expect)

    def json_cli(self, *args):
        return self.cli.json('--connection', self.uri, '--config-file',
                             self.conf, *args)

    def children(self):
        return {c['device_address']: c
                for c in self.json_cli('inventory')['children']}

    def test_inventory_has_one_provider_per_gpu(self):
        inventory = self.json_cli('inventory')
        node = inventory['root']['name']
        children = {c['device_address']: c for c in inventory['children']}
        self.assertEqual([gpu_host.pf_address(g) for g in range(8)],
                         sorted(children))
        for gpu in range(8):
            child = children[gpu_host.pf_address(gpu)]
            self.assertEqual('%s_pci_0000_%02x_00_0' % (node, 0x41 + gpu),
                             child['name'])
            self.assertEqual(
                {'total': 16, 'reserved': 0, 'used': 0},
                {k: child['inventories']['VGPU'][k]
                 for k in ('total', 'reserved', 'used')})
            self.assertEqual([gpu_host.vf_address(gpu, i)
                              for i in range(16)],
                             child['parent_addresses'])
            self.assertEqual(['CUSTOM_MDEV_TYPE_NVIDIA_699'],
                             child['traits'])
        table = self.run_cli('inventory').stdout
        self.assertIn('0000:41:00.0 (16 mdev parents)', table)
        self.assertNotIn('_pci_0000_41_00_4', table)
        self.assertEqual(8, table.count('CUSTOM_MDEV_TYPE_NVIDIA_699'))

    def test_inventory_has_the_series_provider_model(self):
        # The Nova series (patch 0009, PCI in Placement) reports this host
        # as benchmarks/placement_trees builds it for the Placement
        # benchmark, shape a, model per-GPU: one provider per PF with the
        # units of all its VF parents. The library's inventory groups the
        # same: the same GPUs, the same units each, the same type trait.
        # Names and classes differ by design: the library shows the
        # Placement path's (<node>_pci_<address>, VGPU), the series' PCI
        # path names a provider <node>_<address> with CUSTOM_MDEV_<TYPE>.
        shape = placement_trees.SHAPES['a']
        rc = placement_trees.resource_class(shape.mdev_type)
        type_trait = placement_trees.type_trait(shape.mdev_type)
        series = {
            p['name'].split('_', 1)[1].lower(): (
                p['inventories'][rc]['total'],
                [t for t in p['traits'] if t.startswith('CUSTOM_MDEV_')])
            for p in placement_trees.host_tree(shape, 'per-GPU', 0)[1:]}
        ours = {c['device_address']: (c['inventories']['VGPU']['total'],
                                      c['traits'])
                for c in self.json_cli('inventory')['children']}
        self.assertEqual([type_trait], series[gpu_host.pf_address(0)][1])
        self.assertEqual(series, ours)
        self.assertEqual(8, len(ours))
        # and not the model the series had first, one provider per VF
        # parent (128 providers of one unit)
        self.assertNotEqual(
            len(placement_trees.host_tree(shape, 'per-parent', 0)) - 1,
            len(ours))

    def test_resources_claim_takes_vf_parents_of_one_gpu(self):
        gpu_host.write(self.cli.tmp, gpus=2)     # the same files, smaller
        out = self.run_cli('claim', '--extra-spec', 'resources:VGPU=4',
                           '--instance', INSTANCE).stdout
        self.assertIn('VGPU=4', out)
        mine = [d for d in self.json_cli('devices')
                if d['instance_uuid'] == INSTANCE]
        self.assertEqual(4, len(mine))
        self.assertEqual([gpu_host.vf_address(0, i) for i in range(4)],
                         sorted(d['parent_addr'] for d in mine))
        # An mdev through the alias path: reserved on the same provider;
        # a whole GPU: its provider all reserved.
        self.run_cli('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:1',
                     '--instance', OTHER)
        self.run_cli('claim', '--extra-spec', 'pci_passthrough:alias=a100:1',
                     '--instance', WHOLE)
        (whole,) = [d['address'] for d in self.json_cli('devices')
                    if d['instance_uuid'] == WHOLE]
        children = self.children()
        got = {a: tuple(c['inventories']['VGPU'][k]
                        for k in ('total', 'reserved', 'used'))
               for a, c in children.items() if a in ('0000:41:00.0', whole)}
        self.assertNotEqual('0000:41:00.0', whole)
        self.assertEqual({'0000:41:00.0': (16, 1, 4), whole: (16, 16, 0)},
                         got)
        for instance in (INSTANCE, OTHER, WHOLE):
            self.run_cli('release', '--instance', instance)
        self.assertEqual({(16, 0, 0)}, {
            tuple(c['inventories']['VGPU'][k]
                  for k in ('total', 'reserved', 'used'))
            for c in self.children().values()})

    def test_vf_parents_of_one_gpu_with_two_types_are_refused(self):
        # The same two files, rewritten: 2 GPUs, one VF of the first
        # mapped to another type.
        gpu_host.write(
            self.cli.tmp, gpus=2, nova_conf=gpu_host.NOVA_CONF.replace(
                'enabled_mdev_types = nvidia-699',
                'enabled_mdev_types = nvidia-699, nvidia-700\n'
                '[mdev_nvidia-700]\ndevice_addresses = 0000:41:00.5\n'),
            types={'0000:41:00.5': [('nvidia-699', 1), ('nvidia-700', 1)]})
        check = self.run_cli('check-config', expect=2).stdout
        self.assertIn(
            'error: [mdev_nvidia-700] device_addresses = 0000:41:00.5: '
            'physical device 0000:41:00.0 on host ', check)
        self.assertIn('nvidia-700 (VGPU) on 0000:41:00.5; Placement gets '
                      'one provider per physical GPU', check)
        err = self.run_cli('inventory', expect=2).stderr
        self.assertIn("Invalid physical device '0000:41:00.0'", err)
        self.assertIn('nvidia-699 (VGPU) on 15 parents', err)
        self.assertNotIn('Traceback', err)

    def test_max_instances_per_host_once_the_device_spec_has_its_own(self):
        limited = gpu_host.NOVA_CONF + '[mdev_nvidia-699]\nmax_instances = 20\n'

        def totals():
            return [c['inventories'].get('VGPU', {}).get('total', 0)
                    for c in sorted(self.json_cli('inventory')['children'],
                                    key=lambda c: c['device_address'])]

        # Without the device_spec key: nova-pci-mdev's former per-parent
        # reading (one instance per VF parent: no limit), and a warning.
        gpu_host.write(self.cli.tmp, nova_conf=limited)
        self.assertEqual([16] * 8, totals())
        out = self.run_cli('check-config').stdout
        self.assertIn('warning: [mdev_nvidia-699] max_instances = 20: read '
                      'per mdev parent on host ', out)
        self.assertIn('(128 slots of nvidia-699 in all)', out)
        # With it: Nova's meaning, 20 per host, the GPUs in address order.
        gpu_host.write(self.cli.tmp, nova_conf=limited.replace(
            'device_spec = {"vendor_id": "10de", "product_id": "20b5"}',
            'device_spec = {"vendor_id": "10de", "mdev_type": "nvidia-699", '
            '"max_instances": 1}\n'
            'device_spec = {"vendor_id": "10de", "product_id": "20b5"}'))
        self.assertEqual([16, 4, 0, 0, 0, 0, 0, 0], totals())
        self.assertIn('configuration OK', self.run_cli('check-config').stdout)
