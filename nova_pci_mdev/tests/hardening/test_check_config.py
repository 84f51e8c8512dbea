"""check-config finds every device-level mistake (issue 15, items 7, 9, 10).

Each story writes a nova.conf for the bundled sample host (whose devices
are drawn by ``nova-pci-mdev devices``: GPUs 0000:3b:00.0 and
0000:d8:00.0, mlx5 0000:5e:00.0, the X710 PF 0000:af:00.0 with VFs
0000:af:02.0-3, mtty) and runs ``cli.main`` in this process. Once each of
these said "configuration OK" or was accepted silently.
"""

import io
import os

import fixtures

from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.hardening import recorder

BASE = """
[pci]
device_spec = {"vendor_id": "10de"}
device_spec = {"vendor_id": "8086", "product_id": "154c"}
device_spec = {"vendor_id": "15b3"}
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-222", \
"numa_policy": "required"}
[devices]
enabled_mdev_types = %(types)s
%(groups)s
"""


class _CliCase(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def run_cli(self, conf_text, *argv):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(conf_text)
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--state-dir', os.path.join(self.tmp, 'state'),
                         '--config-file', path] + list(argv),
                        out=out, err=err)
        text = out.getvalue() + err.getvalue()
        self.assertNotIn('Traceback', text)
        return code, text

    def check(self, types, groups, severity, expected):
        code, text = self.run_cli(BASE % dict(types=types, groups=groups),
                                  'check-config')
        self.assertEqual(2 if severity == 'error' else 0, code, text)
        self.assertNotIn('configuration OK', text)
        for line in expected:
            self.assertIn('%s: %s' % (severity, line), text)


class CheckConfigTest(_CliCase):

    def test_device_addresses_mistakes(self):
        cases = (
            ('0000:af:02.0', 'error',
             '[mdev_nvidia-222] device_addresses = 0000:af:02.0: is a '
             'type-VF device without mdev types and whitelisted for whole '
             'passthrough on host sample-compute'),
            ('0000:99:00.0', 'warning',
             '[mdev_nvidia-222] device_addresses = 0000:99:00.0: no such '
             'device on host sample-compute'),
            ('0000:5e:00.0', 'error',
             '[mdev_nvidia-222] device_addresses = 0000:5e:00.0: supports '
             'mlx5_core-local on host sample-compute, not nvidia-222'),
        )
        with self.record('config', '[mdev_<type>] device_addresses naming a '
                         'whitelisted VF without mdev types, an address the '
                         'host lacks, a parent without the type (item 7)',
                         'error (exit 2) / warning naming group, option, '
                         'address and rule') as row:
            for address, severity, line in cases:
                row.cases += 1
                self.check('nvidia-222', '[mdev_nvidia-222]\n'
                           'device_addresses = 0000:d8:00.0, %s\n' % address,
                           severity, [line])

    def test_enabled_type_nobody_offers(self):
        with self.record('config', '[devices] enabled_mdev_types listing a '
                         'type no device of the host offers (item 7)',
                         'warning naming the type and the host') as row:
            row.cases += 1
            self.check('nvidia-222, nvidia-999', '', 'warning', [
                '[devices] enabled_mdev_types = nvidia-999: no device of '
                'host sample-compute offers this type'])

    def test_option_typos_in_mdev_groups(self):
        with self.record('config', 'typos in [mdev_<type>] / [vgpu_<type>] '
                         'option names (max_instance=, mdev_clas=) (item 10)',
                         'warning naming the option, the known ones and the '
                         'likely one') as row:
            for group, typo, meant in (
                    ('mdev_nvidia-222', 'max_instance', 'max_instances'),
                    ('vgpu_nvidia-222', 'mdev_clas', 'mdev_class'),
                    ('mdev_nvidia-222', 'device_address', 'device_addresses')):
                row.cases += 1
                self.check('nvidia-222', '[%s]\n%s = 3\n' % (group, typo),
                           'warning', [
                               "[%s] %s = '3': unknown option, ignored "
                               "(the options of this group are "
                               "device_addresses, max_instances, mdev_class)"
                               "; did you mean %s?" % (group, typo, meant)])

    def test_vgpu_group_shadowed_by_mdev_group(self):
        with self.record('config', '[vgpu_<type>] (deprecated name) shadowed '
                         'by [mdev_<type>] setting the same option (item 10)',
                         'warning naming both groups and the value used'
                         ) as row:
            row.cases += 1
            self.check('nvidia-222', '[mdev_nvidia-222]\nmax_instances = 2\n'
                       '[vgpu_nvidia-222]\nmax_instances = 8\n', 'warning', [
                           "[vgpu_nvidia-222] max_instances = '8': shadowed "
                           "by [mdev_nvidia-222] max_instances = 2, which is "
                           "used instead"])

    def test_numbered_groups_without_group_policy(self):
        with self.record('config', 'resources1: and resources2: without '
                         'group_policy, or a bad group_policy (item 10)',
                         'claim exits 2 naming group_policy, the groups and '
                         'the allowed values; isolate is honoured') as row:
            conf = BASE % dict(types='nvidia-222, nvidia-223, '
                               'mlx5_core-local', groups=(
                                   '[mdev_nvidia-222]\ndevice_addresses = '
                                   '0000:d8:00.0\n[mdev_nvidia-223]\n'
                                   'device_addresses = 0000:3b:00.0\n'))
            two = ['--extra-spec', 'resources1:VGPU=8',
                   '--extra-spec', 'resources2:VGPU=8']
            for extra, code, text in (
                    ([], 2, 'group_policy=\'(not set)\': required with more '
                     'than one numbered request group (resources1:, '
                     'resources2:)'),
                    (['--extra-spec', 'group_policy=both'], 2,
                     'expected one of none, isolate'),
                    (['--extra-spec', 'group_policy=isolate'], 0,
                     'VGPU=8')):
                row.cases += 1
                got, out = self.run_cli(conf, 'claim', '--dry-run',
                                        *(two + extra))
                self.assertEqual(code, got, out)
                self.assertIn(text, out)
            # isolate: two providers, one each (16 on d8, 8 on 3b).
            self.assertEqual(2, out.count('placement allocation on'))


class WhereFreeTest(_CliCase):
    """Item 9: "nothing free" messages say what is free where."""

    def test_alias_shortfall_names_nodes_parents_and_policy(self):
        with self.record('capacity', 'pci_passthrough:alias asking for more '
                         'than is free, with and without hw:numa_nodes '
                         '(item 9)', 'exit 1; the message gives the free '
                         'count per NUMA node and per parent, and the '
                         'policy') as row:
            conf = BASE % dict(types='nvidia-222', groups='')
            for argv, texts in (
                    (['--extra-spec', 'pci_passthrough:alias=vGPU:33'],
                     ['alias vGPU: 32 free nvidia-222 slots',
                      'on any NUMA node (the instance has no NUMA topology)',
                      'free per parent: 0000:3b:00.0 on NUMA node 0: 16, '
                      '0000:d8:00.0 on NUMA node 1: 16']),
                    (['--extra-spec', 'pci_passthrough:alias=vGPU:17',
                      '--extra-spec', 'hw:numa_nodes=1'],
                     ['on NUMA node 1, policy required, 17 requested',
                      '16 free on NUMA node 0',
                      'free per parent: 0000:3b:00.0 on NUMA node 0: 16'])):
                row.cases += 1
                code, text = self.run_cli(conf, 'claim', '--dry-run', *argv)
                self.assertEqual(1, code, text)
                for expected in texts:
                    self.assertIn(expected, text)

    def test_resources_shortfall_names_every_provider(self):
        with self.record('capacity', 'resources:VGPU=N beyond every provider '
                         '(item 9)', 'exit 1; the message gives each '
                         'provider\'s free slots, its parent and NUMA node'
                         ) as row:
            row.cases += 1
            conf = BASE % dict(types='nvidia-222, nvidia-223', groups=(
                '[mdev_nvidia-222]\ndevice_addresses = 0000:d8:00.0\n'
                '[mdev_nvidia-223]\ndevice_addresses = 0000:3b:00.0\n'))
            code, text = self.run_cli(conf, 'claim', '--dry-run',
                                      '--extra-spec', 'resources:VGPU=20')
            self.assertEqual(1, code, text)
            self.assertIn(
                'resources:VGPU=20: no provider of VGPU has 20 free slot(s); '
                'free per provider: sample-compute_pci_0000_3b_00_0 '
                '(0000:3b:00.0, NUMA node 0): 8, '
                'sample-compute_pci_0000_d8_00_0 (0000:d8:00.0, NUMA node 1): '
                '16 (24 in total on this host)', text)
