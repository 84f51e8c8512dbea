"""The console script on the bundled L40S host (NVIDIA vGPU VFs).

``nova_pci_mdev/data/l40s_host.xml`` through libvirt's real test driver,
its sidecar, the sysfs tree copied into the state directory, and
``l40s_nova.conf``: the README's alias story on a GPU without mdevs::

    NUMA node 1: L40S PF 0000:41:00.0, 16 VFs 0000:41:00.4 - 0000:41:02.3
    alias vGPU = nvidia-1150 (NVIDIA L40S-4Q), max_instances 12
"""

import os

import testtools

from nova_pci_mdev import data
from nova_pci_mdev.tests.fixtures import cli as cli_fixture

INSTANCE = cli_fixture.INSTANCE
FIRST_VF = '0000:41:00.4'


class TestL40sHost(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cli = self.useFixture(cli_fixture.CliFixture())

    def run_cli(self, *args, expect=0, conf=data.L40S_NOVA_CONF):
        return self.cli.run('--connection', data.l40s_connection_uri(),
                            '--config-file', conf, *args, expect=expect)

    def json_cli(self, *args):
        return self.cli.json('--connection', data.l40s_connection_uri(),
                             '--config-file', data.L40S_NOVA_CONF, *args)

    def current(self, vf=FIRST_VF):
        with open(os.path.join(self.cli.state, 'nvidia-sysfs', 'sys', 'bus',
                               'pci', 'devices', vf, 'nvidia',
                               'current_vgpu_type')) as handle:
            return handle.read().strip()

    def test_devices_show_the_vfs_and_their_current_type(self):
        devices = {d['address']: d for d in self.json_cli('devices')}
        self.assertEqual(17, len(devices))
        pf = devices['0000:41:00.0']
        self.assertEqual(('type-PF', 'nvidia-1150', 1), (
            pf['dev_type'], pf['mdev_type'], pf['numa_node']))
        vfs = [d for d in devices.values() if d['dev_type'] == 'type-VF']
        self.assertEqual(16, len(vfs))
        self.assertEqual({None}, {d['current_vgpu_type'] for d in vfs})
        self.assertEqual(12, sum(1 for d in vfs if d['whitelisted']))
        out = self.run_cli('devices').stdout
        self.assertIn('vGPU type set on claim', out)
        self.assertIn('[not offered]', out)

    def test_the_alias_story_sets_the_type_and_release_clears_it(self):
        proc = self.run_cli('claim', '--extra-spec',
                            'pci_passthrough:alias=vGPU:1', '--extra-spec',
                            'hw:numa_nodes=1', '--instance', INSTANCE)
        self.assertIn('on NUMA cell(s) 1', proc.stdout)
        self.assertIn('<hostdev mode="subsystem" type="pci" managed="no">',
                      proc.stdout)
        self.assertIn('function="0x4"', proc.stdout)
        self.assertEqual('1150', self.current())
        (mine,) = [d for d in self.json_cli('devices')
                   if d['instance_uuid'] == INSTANCE]
        self.assertEqual((FIRST_VF, 'type-VF', 'nvidia-1150', 1,
                          'nvidia-1150', 'allocated'), (
            mine['address'], mine['dev_type'], mine['mdev_type'],
            mine['numa_node'], mine['current_vgpu_type'], mine['status']))
        (child,) = self.json_cli('inventory')['children']
        self.assertEqual({'VGPU': {'total': 12, 'reserved': 1, 'used': 0}},
                         {rc: {k: inv[k] for k in ('total', 'reserved',
                                                   'used')}
                          for rc, inv in child['inventories'].items()})
        self.assertIn('CUSTOM_MDEV_TYPE_NVIDIA_1150', child['traits'])
        self.run_cli('release', '--instance', INSTANCE)
        self.assertEqual('0', self.current())
        self.assertEqual(set(), {d['address'] for d in self.json_cli(
            'devices') if d['instance_uuid']})

    def test_check_config_explains_the_gpu(self):
        out = self.run_cli('check-config').stdout
        self.assertIn('note: [devices] enabled_mdev_types = nvidia-1150: '
                      'NVIDIA vGPU GPU 0000:41:00.0 (16 VFs, one vGPU each) '
                      'exposes nvidia-1150 -> VGPU: 12 slot(s)', out)
        self.assertIn('nvidia-1145 (NVIDIA L40S-1B)', out)
        self.assertIn('configuration OK', out)

    def test_check_config_warns_about_what_the_gpu_cannot_serve(self):
        conf = os.path.join(self.cli.tmp, 'nova.conf')
        with open(conf, 'w') as handle:
            handle.write('[pci]\ndevice_spec = {"vendor_id": "10de"}\n'
                         '[devices]\nenabled_mdev_types = nvidia-01150, '
                         'nvidia-99\n[mdev_nvidia-01150]\ndevice_addresses = '
                         '0000:41:00.0\n')
        out = self.run_cli('check-config', conf=conf).stdout
        self.assertIn('warning: [devices] enabled_mdev_types = nvidia-01150:'
                      ' names NVIDIA vGPU GPU 0000:41:00.0', out)
        self.assertIn('no leading zero); it is not used there', out)
        self.assertIn('(none for 0000:41:00.0)', out)

    def test_a_malformed_sysfs_file_is_a_clear_host_error(self):
        self.json_cli('devices')             # seeds the state's tree
        path = os.path.join(self.cli.state, 'nvidia-sysfs', 'sys', 'bus',
                            'pci', 'devices', FIRST_VF, 'nvidia',
                            'creatable_vgpu_types')
        with open(path, 'a') as handle:
            handle.write('1150 NVIDIA L40S-4Q\n')
        proc = self.run_cli('devices', expect=3)
        self.assertIn(path, proc.stderr)
        self.assertIn('expected "<type id> : <vGPU name>"', proc.stderr)
        self.assertNotIn('Traceback', proc.stderr)
