"""Every node device libvirt lists and we do not use is named (issue 31).

The README promises a warning naming every node device left out; a guest
may be using an mdev whose parent is missing. Stories run ``cli.main`` in
this process on libvirt's own node-device test data
(``tests/fixtures/libvirt_nodedev_mdevs.xml``) and on copies of the
bundled sample host with node devices added through its sidecar, and
count the warnings of every command: exactly one per device left out,
naming it and why. Counts beyond what the objects hold are capped with a
warning naming the device, the value and the cap, never wrapped or zeroed.
"""

import collections
import io
import json
import os
import re
import shutil

import fixtures

from nova_pci_mdev import data
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.fixtures import libvirt_data
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.virt.libvirt import nodedev

INSTANCE = 'c0ffee00-0000-4000-8000-000000000131'
_WARNING_RE = re.compile(r'^warning: Node device (\S+) left out: (.*)$',
                         re.MULTILINE)
NOVA_CONF = """[pci]
device_spec = {"vendor_id": "8086"}
alias = {"name": "foo", "vendor_id": "8086", "mdev_type": "foo1"}
[devices]
enabled_mdev_types = foo1, vfio_ap-passthrough
"""
#: Extra node devices for the sample host, and the warning of each.
ORPHAN_UNDER_NIC = 'a1a1a1a1-0000-4000-8000-000000000001'
ORPHAN_UNDER_BROKEN = 'a1a1a1a1-0000-4000-8000-000000000002'
ORPHAN_GONE = 'a1a1a1a1-0000-4000-8000-000000000003'


def _mdev(uuid, parent, kind='nvidia-222'):
    return ("<device><name>mdev_%s</name><parent>%s</parent><capability "
            "type='mdev'><type id='%s'/><uuid>%s</uuid></capability>"
            "</device>" % (uuid.replace('-', '_'), parent, kind, uuid))


SAMPLE_EXTRAS = {
    'pci_0000_86_00_0': (
        "<device><name>pci_0000_86_00_0</name><capability type='pci'>"
        "<domain>0</domain></capability></device>", 'missing <bus>'),
    'mdev_' + ORPHAN_UNDER_NIC.replace('-', '_'): (
        _mdev(ORPHAN_UNDER_NIC, 'pci_0000_af_00_0'),
        'its parent pci_0000_af_00_0 (0000:af:00.0) has no mdev types'),
    'mdev_' + ORPHAN_UNDER_BROKEN.replace('-', '_'): (
        _mdev(ORPHAN_UNDER_BROKEN, 'pci_0000_86_00_0'),
        'its parent pci_0000_86_00_0 is left out too'),
    'mdev_' + ORPHAN_GONE.replace('-', '_'): (
        _mdev(ORPHAN_GONE, 'pci_0000_99_00_0'),
        'its parent pci_0000_99_00_0 is not listed by libvirt'),
}


class LeftOutDevicesTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def cli(self, uri, conf, state, *argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--connection', uri, '--state-dir', state,
                         '--config-file', conf] + list(argv), out=out,
                        err=err)
        text = out.getvalue() + err.getvalue()
        self.assertNotIn('Traceback', text)
        self.assertEqual(0, code, '%s: %s' % (' '.join(argv), text))
        return out.getvalue(), err.getvalue()

    def warned(self, text, expected, command, row):
        """Exactly one warning per device of ``expected`` ({device: what
        it says}), and none for any other device."""
        found = collections.defaultdict(list)
        for device, reason in _WARNING_RE.findall(text):
            found[device].append(reason)
        self.assertEqual(sorted(expected), sorted(found), command)
        for device, reasons in found.items():
            row.cases += 1
            self.assertEqual(1, len(reasons), '%s: %s' % (command, device))
            self.assertIn(expected[device], reasons[0], command)

    def commands(self, alias):
        claim = ('claim', '--extra-spec', 'pci_passthrough:alias=%s:1'
                 % alias, '--instance', INSTANCE)
        return (('devices',), ('--format', 'json', 'devices'), ('pools',),
                ('inventory',), ('check-config',), claim, ('restore',),
                ('release', '--instance', INSTANCE))

    def test_libvirt_own_test_data(self):
        conf = os.path.join(self.tmp, 'nova.conf')
        with open(conf, 'w') as handle:
            handle.write(NOVA_CONF)
        state = os.path.join(self.tmp, 'state')
        with self.record('exits', "libvirt's own tests/nodedevschemadata: 9 "
                         'mdev files (8 with a missing or unusable parent, 1 '
                         'misnamed), s390 ap_matrix and css mdev parents; '
                         'every command (issue 31)', 'exactly one warning '
                         'per node device left out, naming it and why; '
                         'devices lists them, the PCI parent works') as row:
            for argv in self.commands('foo'):
                out, err = self.cli('test://' + libvirt_data.HOST, conf,
                                    state, *argv)
                self.warned(err + (out if 'check-config' in argv else ''),
                            libvirt_data.LEFT_OUT, ' '.join(argv), row)

    def test_orphans_on_the_sample_host(self):
        host = os.path.join(self.tmp, 'sample.xml')
        shutil.copy(data.SAMPLE_HOST_XML, host)
        with open(data.SAMPLE_HOST_TOPOLOGY) as handle:
            sidecar = json.load(handle)
        sidecar['extra_node_devices'] += [xml for xml, _why in
                                          SAMPLE_EXTRAS.values()]
        with open(os.path.join(self.tmp, 'sample_topology.json'),
                  'w') as handle:
            json.dump(sidecar, handle)
        expected = {name: why for name, (_xml, why) in SAMPLE_EXTRAS.items()}
        state = os.path.join(self.tmp, 'state')
        with self.record('exits', 'mdevs under a NIC without mdev types, '
                         'under a parent whose XML is broken, under a parent '
                         'libvirt does not list, on the sample host; every '
                         'command (issue 31)', 'exactly one warning per '
                         'node device left out, naming it and why; the '
                         'rest of the host works') as row:
            for argv in self.commands('vGPU'):
                out, err = self.cli('test://' + host, data.SAMPLE_NOVA_CONF,
                                    state, *argv)
                self.warned(err + (out if 'check-config' in argv else ''),
                            expected, ' '.join(argv), row)

    def test_counts_beyond_the_objects(self):
        """A sidecar's virtual parent reporting availableInstances of
        2**64 showed 0 slots and "configuration OK"; 2**63 showed
        9223372036854775808 slots."""
        with self.record('capacity', 'availableInstances beyond what the '
                         'objects, Nova\'s database and Placement hold '
                         '(2**31, 2**63, 2**64, 10**40) (issue 31)',
                         'capped at 2**31 - 1 with a warning naming the '
                         'device, the value and the cap, on every command; '
                         'never wrapped or zeroed') as row:
            for reported in (2 ** 31, 2 ** 63, 2 ** 64, 10 ** 40):
                uri = self._mtty_host(reported)
                state = os.path.join(self.tmp, 'state-%d' % row.cases)
                for command in ('devices', 'inventory', 'check-config'):
                    row.cases += 1
                    out, err = self.cli(uri, data.SAMPLE_NOVA_CONF, state,
                                        '--format', 'json', command)
                    text = out + err
                    self.assertEqual(1, text.count(
                        'availableInstances of mtty-1 %d is more than %d'
                        % (reported, nodedev.MAX_COUNT)), command)
                out, _err = self.cli(uri, data.SAMPLE_NOVA_CONF, state,
                                     '--format', 'json', 'inventory')
                (mtty,) = [c for c in json.loads(out)['children']
                           if c['device_address'] == 'mtty']
                self.assertEqual(nodedev.MAX_COUNT, sum(
                    inv['total'] for inv in mtty['inventories'].values()))

    def _mtty_host(self, available):
        directory = os.path.join(self.tmp, 'mtty-%d' % available)
        os.mkdir(directory)
        host = os.path.join(directory, 'sample.xml')
        shutil.copy(data.SAMPLE_HOST_XML, host)
        with open(data.SAMPLE_HOST_TOPOLOGY) as handle:
            sidecar = json.load(handle)
        sidecar['extra_node_devices'] = [
            xml.replace('<availableInstances>24<', '<availableInstances>%d<'
                        % available)
            for xml in sidecar['extra_node_devices']]
        with open(os.path.join(directory, 'sample_topology.json'),
                  'w') as handle:
            json.dump(sidecar, handle)
        return 'test://' + host
