"""Host descriptions that are wrong (issue 15, item 10).

The rule: what the host reports (node-device XML, capabilities, a test
host's XML file and sidecar) is the host, not the operator's input; when
the host as a whole cannot be read the CLI exits 3 ("host error") naming
the file, whatever the mistake. One node device that cannot be used (its
XML, or an address / mdev UUID that another device claims too) does not
make the host unusable: it is left out, each command warns naming it, and
no parent is offered a slot its XML does not give it.

Hosts are copies of the bundled sample host (XML and sidecar), run
through ``cli.main`` in this process.
"""

import io
import json
import os
import shutil

import fixtures

from nova_pci_mdev import data
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.hardening import recorder

EXISTING = 'c4a0c2a6-3b4f-4d5e-9a43-2b8b5c7e0d11'     # on 0000:d8:00.0


def _mdev_block(xml, uuid):
    start = xml.index('  <device>\n    <name>mdev_%s' % uuid.replace('-', '_'))
    return start, xml.index('</device>', start) + len('</device>\n')


class HostXmlTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        with open(data.SAMPLE_HOST_XML) as handle:
            self.xml = handle.read()
        with open(data.SAMPLE_HOST_TOPOLOGY) as handle:
            self.sidecar = json.load(handle)

    def host(self, name, xml=None, sidecar=None):
        path = os.path.join(self.tmp, name + '.xml')
        with open(path, 'w') as handle:
            handle.write(self.xml if xml is None else xml)
        side = os.path.join(self.tmp, name + '_topology.json')
        if sidecar == 'none':
            pass
        elif isinstance(sidecar, str):
            with open(side, 'w') as handle:
                handle.write(sidecar)
        else:
            with open(side, 'w') as handle:
                json.dump(self.sidecar if sidecar is None else sidecar,
                          handle)
        return 'test://' + path, side

    def cli(self, uri, *argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--connection', uri, '--state-dir',
                         os.path.join(self.tmp, 'state-%s' % abs(hash(uri))),
                         '--format', 'json'] + list(argv), out=out, err=err)
        self.assertNotIn('Traceback', out.getvalue() + err.getvalue())
        return code, out.getvalue(), err.getvalue()

    def test_same_mdev_uuid_under_two_parents(self):
        with self.record('exits', 'the same mdev UUID under two parents in '
                         'the host XML (item 10)', 'both left out with a '
                         'warning naming each; no parent offers more slots '
                         'than its XML gives it') as row:
            start, end = _mdev_block(self.xml, EXISTING)
            twin = self.xml[start:end].replace('0000_d8_00_0', '0000_3b_00_0')
            twin = twin.replace('0000:d8:00.0', '0000:3b:00.0').replace(
                'pci_0000_d8_00_0', 'pci_0000_3b_00_0').replace(
                'nvidia-222', 'nvidia-223')
            uri, _side = self.host('twins', self.xml[:end] + twin +
                                   self.xml[end:])
            for command in ('devices', 'inventory', 'check-config'):
                row.cases += 1
                code, out, err = self.cli(uri, command)
                self.assertEqual(0, code, err)
                self.assertEqual(2, (out + err).count(
                    'left out: its UUID %s is also that of node device'
                    % EXISTING))
            _code, out, _err = self.cli(uri, 'inventory')
            totals = {c['device_address']: sum(
                i['total'] for i in c['inventories'].values())
                for c in json.loads(out)['children']}
            # 0000:3b:00.0: 8 available; 0000:d8:00.0: 14 available and
            # the one mdev both do not claim.
            self.assertEqual(8, totals['0000:3b:00.0'])
            self.assertEqual(15, totals['0000:d8:00.0'])
            _code, out, _err = self.cli(uri, 'devices')
            self.assertNotIn(EXISTING, {d['address'] for d in
                                        json.loads(out)})

    def test_one_bad_node_device(self):
        with self.record('exits', 'one node device whose XML cannot be used '
                         '(item 10)', 'it is left out with a warning naming '
                         'it; the rest of the host works (devices, claim, '
                         'check-config exit 0)') as row:
            sidecar = dict(self.sidecar)
            sidecar['extra_node_devices'] = sidecar['extra_node_devices'] + [
                "<device><name>broken</name><capability type='pci'>"
                "<domain>0</domain></capability></device>"]
            uri, _side = self.host('broken', sidecar=sidecar)
            for argv in (('devices',), ('check-config',),
                         ('claim', '--extra-spec',
                          'pci_passthrough:alias=vGPU:1')):
                row.cases += 1
                code, out, err = self.cli(uri, *argv)
                self.assertEqual(0, code, err)
                self.assertIn('Node device broken left out: missing <bus>',
                              out + err)

    def test_host_description_errors_exit_3(self):
        with self.record('exits', 'host XML file missing or not XML; sidecar '
                         'not JSON, a directory, with bad cells (item 10)',
                         'exit 3 ("host error") naming the file, for every '
                         'one of them') as row:
            directory = os.path.join(self.tmp, 'dir_topology.json')
            os.mkdir(directory)
            cases = (
                ('test://' + os.path.join(self.tmp, 'nope.xml'), 'nope.xml'),
                (self.host('garbage', xml='<node><device>')[0],
                 'garbage.xml'),
                (self.host('notjson', sidecar='{"cells": [')[0],
                 'notjson_topology.json'),
                (self.host('dir', sidecar='none')[0], 'dir_topology.json'),
                (self.host('cells', sidecar=dict(
                    self.sidecar, cells=[{'id': 'x'}]))[0],
                 'cells_topology.json'))
            for uri, name in cases:
                for command in ('devices', 'check-config'):
                    row.cases += 1
                    code, _out, err = self.cli(uri, command)
                    self.assertEqual(3, code, '%s %s: %s' % (name, command,
                                                             err))
                    self.assertIn('host error', err)
                    self.assertIn(name, err)
            shutil.rmtree(directory)
