"""The sidecar's ``hypervisor``: what an emulated test-driver host stands
for, read through the real libvirt test driver."""

import json
import os

import fixtures
import libvirt
import testtools

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt.emulated import host as emulated

libvirt.registerErrorHandler(lambda *args: None, None)


class HypervisorTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conn = libvirt.open('test://' + data.SAMPLE_HOST_XML)
        self.addCleanup(self.conn.close)

    def host(self, sidecar):
        return emulated.EmulatedHost(self.conn, self.tmp, sidecar)

    def test_the_sample_host_stands_for_qemu_8_2_2(self):
        host = self.host(emulated.load_sidecar(data.SAMPLE_HOST_TOPOLOGY))
        self.assertEqual(('QEMU', 8002002), (host.hypervisor_type,
                                             host.hypervisor_version))
        self.assertEqual(self.conn.getLibVersion(), host.lib_version)

    def test_without_it_the_test_driver_speaks(self):
        host = self.host(emulated.Sidecar())
        self.assertEqual(('TEST', 2), (host.hypervisor_type,
                                       host.hypervisor_version))

    def test_bad_values_name_the_key(self):
        path = os.path.join(self.tmp, 'h_topology.json')
        for bad in ({'type': 'QEMU'}, {'type': 'QEMU', 'version': '8.2'},
                    {'type': '', 'version': '8.2.2'},
                    {'type': 'QEMU', 'version': '8.2.x'},
                    {'type': 'QEMU', 'version': '8.2.2000'},
                    {'type': 'QEMU', 'version': '8.2.2', 'x': 1}, 'QEMU'):
            with open(path, 'w') as handle:
                json.dump({'hypervisor': bad}, handle)
            exc = self.assertRaises(exception.TopologySidecarInvalid,
                                    emulated.load_sidecar, path)
            self.assertIn('hypervisor must be {"type": NAME', str(exc))
