"""The console script on libvirt's own node-device test data (issue 31).

``tests/fixtures/libvirt_nodedev_mdevs.xml`` is a host file for libvirt's
real test driver made of the mdev files of libvirt's
``tests/nodedevschemadata`` and the mdev parents there (see its header)::

    pci_0000_02_10_7   PCI parent, foo1 x1, foo2 x2     used
    ap_matrix          s390 AP matrix                   left out: its kind
    css_0_0_fffe       s390 css subchannel              left out: its kind
    8 mdevs            parents absent, "computer" or    left out: their parent
                       ap_matrix                        (one: its name)

Every command warns exactly once about each node device left out, naming
it and why; ``devices`` also lists them (a guest may be using an mdev
among them); ``check-config`` says why the types of the left-out parents
are not offered.
"""

import collections
import json
import os
import re

import testtools

from nova_pci_mdev.tests.fixtures import cli as cli_fixture
from nova_pci_mdev.tests.fixtures import libvirt_data

HOST = libvirt_data.HOST
LEFT_OUT = libvirt_data.LEFT_OUT
INSTANCE = cli_fixture.INSTANCE
NOVA_CONF = """[pci]
device_spec = {"vendor_id": "8086"}
alias = {"name": "foo", "vendor_id": "8086", "mdev_type": "foo1"}
[devices]
enabled_mdev_types = foo1, vfio_ap-passthrough
"""
_WARNING_RE = re.compile(r'^warning: Node device (\S+) left out: (.*)$',
                         re.MULTILINE)


class TestLibvirtTestData(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cli = self.useFixture(cli_fixture.CliFixture())
        self.conf = os.path.join(self.cli.tmp, 'nova.conf')
        with open(self.conf, 'w') as handle:
            handle.write(NOVA_CONF)

    def run_cli(self, *args, expect=0):
        return self.cli.run('--connection', 'test://' + HOST,
                            '--config-file', self.conf, *args, expect=expect)

    def assertOneWarningEach(self, text, command):
        found = collections.defaultdict(list)
        for device, reason in _WARNING_RE.findall(text):
            found[device].append(reason)
        self.assertEqual(sorted(LEFT_OUT), sorted(found), command)
        for device, reasons in found.items():
            self.assertEqual(1, len(reasons), '%s: %s' % (command, device))
            self.assertIn(LEFT_OUT[device], reasons[0], command)

    def test_every_command_warns_once_per_device_left_out(self):
        claim = ('claim', '--extra-spec', 'pci_passthrough:alias=foo:1',
                 '--instance', INSTANCE)
        for argv in (('devices',), ('--format', 'json', 'devices'),
                     ('pools',), ('inventory',), ('check-config',),
                     claim[:-2] + ('--dry-run',), claim,
                     ('restore',), ('release', '--instance', INSTANCE)):
            proc = self.run_cli(*argv)
            # check-config reports on stdout, the others on stderr.
            self.assertOneWarningEach(
                proc.stderr + (proc.stdout if 'check-config' in argv
                               else ''), ' '.join(argv))

    def test_devices_lists_what_it_leaves_out(self):
        devices = self.cli.json('--connection', 'test://' + HOST,
                                '--config-file', self.conf, 'devices')
        used = [d for d in devices if d['status'] != 'left out']
        self.assertEqual(['0000:02:10.7'], [d['address'] for d in used])
        left = {d['node_device']: d for d in devices
                if d['status'] == 'left out'}
        self.assertEqual(sorted(LEFT_OUT), sorted(left))
        orphan = left['mdev_d069d019_36ea_4111_8f0a_8c9a70e21366']
        self.assertEqual(
            ('d069d019-36ea-4111-8f0a-8c9a70e21366', 'mdev-vf',
             'i915-GVTg_V5_8', '0000:00:02.0', False),
            (orphan['address'], orphan['dev_type'], orphan['mdev_type'],
             orphan['parent_addr'], orphan['whitelisted']))
        out = self.run_cli('devices').stdout
        self.assertIn('1 devices (1 whitelisted), 10 node device(s) left '
                      'out', out)
        for device, reason in LEFT_OUT.items():
            self.assertIn('  %s: ' % device, out)

    def test_check_config_says_why_a_type_is_not_offered(self):
        problems = json.loads(self.run_cli('--format', 'json',
                                           'check-config').stdout)
        (enabled,) = [p for p in problems
                      if p.get('option') == 'enabled_mdev_types']
        self.assertEqual('vfio_ap-passthrough', enabled['value'])
        self.assertIn('no device of host', enabled['message'])
        self.assertIn('node device ap_matrix offers it but is left out: an '
                      'mdev parent of kind ap_matrix', enabled['message'])
