"""``live-move-source`` / ``live-move-check``, run as an operator would.

The bundled sample host stands for a QEMU 8.2.2 host (its sidecar's
``hypervisor``) on the real libvirt library (9.0.0 here): new enough for
mdevs, too old for VFs. "Another host" is a second state directory of the
same sample host, and the move document's ``host`` is rewritten as if it
came from elsewhere (a host refuses a move from itself).
"""

import json
import os

import testtools

from nova_pci_mdev.tests.fixtures import cli as cli_fixture

INSTANCE = cli_fixture.INSTANCE
VGPU = 'pci_passthrough:alias=vGPU:1'


class LiveMoveCliTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.src = self.useFixture(cli_fixture.CliFixture())
        self.dst = self.useFixture(cli_fixture.CliFixture())

    def _document(self, **change):
        doc = self.src.json('live-move-source', '--instance', INSTANCE)
        doc.update(host='compute-a', **change)
        path = os.path.join(self.dst.tmp, 'move.json')
        with open(path, 'w') as handle:
            json.dump(doc, handle)
        return doc, path

    def test_check_a_planned_move_changes_nothing(self):
        claimed = self.src.json('claim', '--extra-spec', VGPU, '--instance',
                                INSTANCE)
        doc, path = self._document()
        (src_dev,) = claimed['devices']
        self.assertEqual(
            ([src_dev['address']], 'QEMU', [8, 2, 2]),
            ([d['address'] for d in doc['devices']],
             doc['versions']['hypervisor_type'],
             doc['versions']['hypervisor']))
        domain = os.path.join(self.dst.tmp, 'guest.xml')
        with open(domain, 'w') as handle:
            handle.write("<domain type='kvm'><name>g</name>%s</domain>"
                         % claimed['devices_xml'])
        before = self.dst.json('devices')
        out = self.dst.json('live-move-check', '--source', path,
                            '--extra-spec', VGPU, '--domain-xml', domain)
        (dst,) = out['devices']
        self.assertEqual(({src_dev['address']: dst['address']}, 'nvidia-222',
                          'compute-a', 'sample-compute'),
                         (out['mapping'], dst['mdev_type'],
                          out['source_host'], out['destination_host']))
        self.assertIn('uuid="%s"' % dst['address'], out['domain_xml'])
        self.assertEqual(before, self.dst.json('devices'))
        table = self.dst.run('live-move-check', '--source', path,
                             '--extra-spec', VGPU).stdout
        self.assertIn('can move from host compute-a to host sample-compute',
                      table)

    def test_refusals_exit_1_naming_the_reason(self):
        self.src.json('claim', '--extra-spec',
                      'pci_passthrough:alias=nic-vf:1', '--instance',
                      INSTANCE)
        proc = self.src.run('live-move-source', '--instance', INSTANCE,
                            expect=1)
        self.assertIn('0000:af:02.0 (8086:154c) of alias nic-vf is not '
                      'live-migratable', proc.stderr)
        self.src.run('release', '--instance', INSTANCE)
        self.src.json('claim', '--extra-spec', VGPU, '--instance', INSTANCE)
        _doc, path = self._document(versions={
            'libvirt': [8, 0, 0], 'hypervisor_type': 'QEMU',
            'hypervisor': [6, 2, 0]})
        proc = self.dst.run('live-move-check', '--source', path,
                            '--extra-spec', VGPU, expect=1)
        self.assertIn('live migration of mdevs needs libvirt >= 8.6.0 and '
                      'QEMU >= 8.1.0; the source host compute-a has libvirt '
                      '8.0.0 and QEMU 6.2.0', proc.stderr)

    def test_bad_documents_exit_2(self):
        missing = os.path.join(self.dst.tmp, 'nothing.json')
        proc = self.dst.run('live-move-check', '--source', missing,
                            '--extra-spec', VGPU, expect=2)
        self.assertIn('Invalid --source %r: cannot be read' % missing,
                      proc.stderr)
        with open(missing, 'w') as handle:
            handle.write('{"host": "a"}')
        proc = self.dst.run('live-move-check', '--source', missing,
                            '--extra-spec', VGPU, expect=2)
        self.assertIn('Invalid move source', proc.stderr)

    def test_a_device_listed_twice_exit_2(self):
        # Accepted before, asked two vGPUs and mapped the mdev to one
        # (issue 31).
        self.src.json('claim', '--extra-spec', VGPU, '--instance', INSTANCE)
        doc = self.src.json('live-move-source', '--instance', INSTANCE)
        (dev,) = doc['devices']
        _doc, path = self._document(devices=[dev, dev])
        before = self.dst.json('devices')
        proc = self.dst.run('live-move-check', '--source', path,
                            '--extra-spec', 'pci_passthrough:alias=vGPU:2',
                            expect=2)
        self.assertIn("Invalid move source devices[1].address %r: also "
                      "devices[0]: an instance holds a device once"
                      % dev['address'], proc.stderr)
        self.assertEqual(before, self.dst.json('devices'))
