"""The installed ``nova-pci-mdev`` console script, run as an operator would.

Each test runs the real script in a subprocess against the real libvirt
test driver: the bundled sample host, or a host XML and nova.conf that the
test writes. State goes to a temporary directory.
"""

import json
import os
import textwrap

import testtools

from nova_pci_mdev.tests.fixtures import cli as cli_fixture


class TestBundledHost(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(cli_fixture.SCRIPT),
                        'console script not installed at %s' % cli_fixture.SCRIPT)
        self.cli = self.useFixture(cli_fixture.CliFixture())

    def test_devices_table_shows_the_sample_host(self):
        out = self.cli.run('devices').stdout
        self.assertIn('host sample-compute', out)
        for text in ('NUMA node 0', 'NUMA node 1', '0000:d8:00.0',
                     'nvidia-222 -> VGPU', 'CUSTOM_MLX5', 'mtty',
                     'type-VF', 'not whitelisted', 'mdev exists'):
            self.assertIn(text, out)

    def test_claim_shows_allocated_then_release_frees(self):
        before = self.cli.json('pools')
        proc = self.cli.run('claim', '--extra-spec',
                            'pci_passthrough:alias=vGPU:1', '--instance',
                            cli_fixture.INSTANCE)
        self.assertIn("<hostdev mode=\"subsystem\" type=\"mdev\" "
                      "model=\"vfio-pci\">", proc.stdout)
        devices = self.cli.json('devices')
        mine = [d for d in devices if d['instance_uuid'] == cli_fixture.INSTANCE]
        self.assertEqual(1, len(mine))
        self.assertEqual(('allocated', 'mdev-vf', 'nvidia-222', 1),
                         (mine[0]['status'], mine[0]['dev_type'],
                          mine[0]['mdev_type'], mine[0]['numa_node']))
        self.assertIn(mine[0]['address'], proc.stdout)

        def count(pools):
            return sum(p['count'] for p in pools
                       if p['mdev_type'] == 'nvidia-222'
                       and p['dev_type'] == 'mdev-vf')
        self.assertEqual(count(before) - 1, count(self.cli.json('pools')))
        inventory = self.cli.json('inventory')
        d8 = [c for c in inventory['children']
              if c['device_address'] == '0000:d8:00.0'][0]
        self.assertEqual(1, d8['inventories']['VGPU']['reserved'])

        out = self.cli.run('release', '--instance', cli_fixture.INSTANCE).stdout
        self.assertIn(mine[0]['address'], out)
        self.assertEqual(count(before), count(self.cli.json('pools')))

    def test_unsatisfiable_request_exits_1_naming_the_alias(self):
        proc = self.cli.run('claim', '--extra-spec',
                            'pci_passthrough:alias=vGPU:17', expect=1)
        self.assertIn('alias vGPU', proc.stderr)
        self.assertIn('17 requested', proc.stderr)

    def test_placement_path_and_dry_run(self):
        dry = self.cli.json('claim', '--extra-spec',
                            'resources:CUSTOM_MLX5=1', '--dry-run')
        self.assertTrue(dry['dry_run'])
        self.assertEqual([], dry['created_mdevs'])
        self.assertEqual([], [d for d in self.cli.json('devices')
                              if d['status'] == 'allocated'])
        done = self.cli.json('claim', '--extra-spec',
                             'resources:CUSTOM_MLX5=1')
        self.assertEqual(1, len(done['created_mdevs']))
        self.assertEqual('0000:5e:00.0', done['devices'][0]['parent_addr'])

    def test_bad_input_exits_2(self):
        for args, text in [
                (('claim', '--extra-spec', 'pci_passthrough:alias=nope:1'),
                 "'nope'"),
                (('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:0'),
                 'vGPU'),
                (('claim', '--extra-spec', 'novalue'), 'KEY=VALUE'),
                (('release', '--instance', 'not-a-uuid'), 'not-a-uuid'),
                (('--format', 'yaml', 'devices'), 'yaml')]:
            proc = self.cli.run(*args, expect=2)
            self.assertIn(text, proc.stderr, args)

    def test_instance_must_be_a_uuid(self):
        # claim --instance '' claimed under a random UUID (issue 31).
        for args in (('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:1',
                      '--instance'), ('release', '--instance'),
                     ('live-move-source', '--instance')):
            for value in ('', 'not-a-uuid', ' '):
                proc = self.cli.run(*(args + (value,)), expect=2)
                self.assertIn("Invalid --instance %r: expected a UUID"
                              % value, proc.stderr)
                self.assertFalse(os.path.exists(self.cli.state))

    def test_help_on_every_command(self):
        for cmd in ('check-config', 'devices', 'pools', 'inventory', 'claim',
                    'release'):
            out = self.cli.run(cmd, '--help').stdout
            self.assertIn('--format', out)
        self.assertIn('Exit codes', self.cli.run('--help').stdout)

    def test_check_config_clean(self):
        out = self.cli.run('check-config').stdout
        self.assertIn('configuration OK', out)


BROKEN_CONF = textwrap.dedent('''
    [pci]
    device_spec = {"vendor_id": "10dex"}
    device_spec = {"address": "0000:84:00.0/../x"}
    alias = {"name": "a", "vendor_id": "10de", "bogus": 1}
    alias = {"vendor_id": "10de"}
    alias = {"name": "everything", "numa_policy": "legacy"}

    [devices]
    enabled_mdev_types = nvidia-35

    [mdev_nvidia-35]
    mdev_class = not valid!
''')

HOST_XML = textwrap.dedent('''
    <node>
      <cpu><mhz>2000</mhz><model>x86_64</model><active>4</active>
        <nodes>1</nodes><sockets>1</sockets><cores>4</cores>
        <threads>1</threads></cpu>
      <memory>8388608</memory>
      <device>
        <name>computer</name>
        <capability type='system'>
          <hardware><vendor>QEMU</vendor><version>1</version>
            <serial>1</serial>
            <uuid>11111111-2222-3333-4444-555555555555</uuid></hardware>
          <firmware><vendor>x</vendor><version>1</version>
            <release_date>01/01/2020</release_date></firmware>
        </capability>
      </device>
      %s
    </node>
''')

GPU = '''
      <device>
        <name>pci_0000_%(bus)s_00_0</name>
        <parent>computer</parent>
        <capability type='pci'>
          <class>0x030200</class>
          <domain>0</domain><bus>%(bus_dec)d</bus><slot>0</slot>
          <function>0</function>
          <product id='0x1eb8'>TU104GL [Tesla T4]</product>
          <vendor id='0x10de'>NVIDIA Corporation</vendor>
          <capability type='mdev_types'>
            <type id='nvidia-35'>
              <name>GRID T4-1B</name>
              <deviceAPI>vfio-pci</deviceAPI>
              <availableInstances>%(avail)d</availableInstances>
            </type>
          </capability>
          <iommuGroup number='%(bus_dec)d'>
            <address domain='0x0000' bus='0x%(bus)s' slot='0x00'
                     function='0x0'/>
          </iommuGroup>
          <numa node='%(node)d'/>
        </capability>
      </device>
'''

OWN_CONF = textwrap.dedent('''
    [pci]
    device_spec = {"vendor_id": "10de"}
    device_spec = {"vendor_id": "abcd"}
    alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-35", "numa_policy": "required"}

    [devices]
    enabled_mdev_types = nvidia-35
''')


class TestOwnHost(testtools.TestCase):
    """A host XML and a nova.conf written by the operator (the test)."""

    def setUp(self):
        super().setUp()
        self.cli = self.useFixture(cli_fixture.CliFixture())
        gpus = ''.join(GPU % dict(bus=bus, bus_dec=int(bus, 16), node=node,
                                  avail=avail)
                       for bus, node, avail in (('84', 0, 2), ('85', 1, 1)))
        self.host = os.path.join(self.cli.tmp, 'myhost.xml')
        with open(self.host, 'w') as f:
            f.write(HOST_XML % gpus)
        self.conf = os.path.join(self.cli.tmp, 'nova.conf')
        with open(self.conf, 'w') as f:
            f.write(OWN_CONF)
        self.opts = ('--connection', 'test://' + self.host,
                     '--config-file', self.conf)

    def test_numa_from_devices_and_policy_required(self):
        out = self.cli.run(*self.opts, 'devices').stdout
        self.assertIn('NUMA node 0', out)
        self.assertIn('NUMA node 1', out)
        claimed = self.cli.json(*self.opts, 'claim', '--extra-spec',
                                'pci_passthrough:alias=vGPU:1',
                                '--extra-spec', 'hw:numa_nodes=1')
        cell = claimed['numa_cells'][0]
        self.assertEqual(cell, claimed['devices'][0]['numa_node'])
        # Node 1 has one slot, node 0 two: fill both, then a clean refusal.
        self.cli.json(*self.opts, 'claim', '--extra-spec',
                      'pci_passthrough:alias=vGPU:1', '--extra-spec',
                      'hw:numa_nodes=1')
        self.cli.json(*self.opts, 'claim', '--extra-spec',
                      'pci_passthrough:alias=vGPU:1', '--extra-spec',
                      'hw:numa_nodes=1')
        proc = self.cli.run(*self.opts, 'claim', '--extra-spec',
                            'pci_passthrough:alias=vGPU:1', '--extra-spec',
                            'hw:numa_nodes=1', expect=1)
        self.assertIn('alias vGPU: 0 free nvidia-35 slots', proc.stderr)
        self.assertIn('policy required', proc.stderr)

    def test_check_config_reports_spec_matching_nothing(self):
        proc = self.cli.run(*self.opts, 'check-config')
        self.assertIn('"abcd"', proc.stdout)
        self.assertIn('matches no device', proc.stdout)

    def test_broken_config_one_line_per_mistake(self):
        with open(self.conf, 'w') as f:
            f.write(BROKEN_CONF)
        proc = self.cli.run(*self.opts, 'check-config', expect=2)
        errors = [line for line in proc.stdout.splitlines()
                  if line.startswith('error:')]
        self.assertEqual(6, len(errors), proc.stdout)
        for text in ('10dex', '../x', 'bogus', 'name', 'not valid!',
                     'alias everything names none of'):
            self.assertIn(text, proc.stdout)
        proc = self.cli.run(*self.opts, 'devices', expect=2)
        self.assertIn('10dex', proc.stderr)


class TestRestoreAfterReboot(testtools.TestCase):
    """A reboot loses the emulated host's mdevs; the views only say so,
    ``restore`` brings each back with its UUID on its parent."""

    def setUp(self):
        super().setUp()
        self.cli = self.useFixture(cli_fixture.CliFixture())

    def _mdevs(self):
        with open(os.path.join(self.cli.state, 'mdevs.json')) as f:
            return json.load(f)['mdevs']

    def _reboot(self, uuid):
        path = os.path.join(self.cli.state, 'mdevs.json')
        with open(path) as f:
            doc = json.load(f)
        lost = doc['mdevs'].pop(uuid)
        with open(path, 'w') as f:
            json.dump(doc, f)
        return lost

    def test_views_report_restore_recreates(self):
        claimed = self.cli.json('claim', '--extra-spec',
                                'pci_passthrough:alias=vGPU:1',
                                '--instance', cli_fixture.INSTANCE)
        uuid = claimed['devices'][0]['address']
        lost = self._reboot(uuid)

        out = self.cli.run('devices').stdout
        self.assertIn('allocated mdev %s is not on the host' % uuid, out)
        self.cli.run('pools')
        self.cli.run('claim', '--dry-run', '--extra-spec',
                     'pci_passthrough:alias=vGPU:1')
        self.assertNotIn(uuid, self._mdevs())      # views only read

        self.assertEqual('restored %s\n' % uuid,
                         self.cli.run('restore').stdout)
        self.assertEqual(lost, self._mdevs()[uuid])  # same parent, type
        mine = [d for d in self.cli.json('devices')
                if d['instance_uuid'] == cli_fixture.INSTANCE]
        self.assertEqual([(uuid, 'allocated')],
                         [(d['address'], d['status']) for d in mine])
        self.assertNotIn('is not on the host', self.cli.run('devices').stdout)
        self.assertEqual({'host': 'sample-compute', 'restored': [],
                          'failed': {}}, self.cli.json('restore'))
