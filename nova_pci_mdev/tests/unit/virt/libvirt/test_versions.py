"""Hypervisor versions and Nova's live-migration minimums (table-driven)."""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import versions

V = versions.HypervisorVersions
MDEV = versions.MDEV_LIVE_MIGRATION
PCI = versions.PCI_LIVE_MIGRATION


class MinimumsTest(testtools.TestCase):

    def test_nova_34_constants(self):
        self.assertEqual(((8, 6, 0), (8, 1, 0)), (MDEV.libvirt, MDEV.qemu))
        self.assertEqual(((10, 0, 0), (8, 2, 2)), (PCI.libvirt, PCI.qemu))

    #: (versions, meets mdev minimum, meets PCI minimum)
    TABLE = [
        (V((8, 6, 0), 'QEMU', (8, 1, 0)), True, False),
        (V((8, 5, 999), 'QEMU', (9, 0, 0)), False, False),
        (V((9, 0, 0), 'QEMU', (8, 0, 9)), False, False),
        (V((10, 0, 0), 'QEMU', (8, 2, 1)), True, False),
        (V((10, 0, 0), 'QEMU', (8, 2, 2)), True, True),
        (V((11, 2, 0), 'QEMU', (9, 1, 0)), True, True),
        # libvirt's test driver: new enough, but it is not QEMU.
        (V((11, 2, 0), 'TEST', (9, 1, 0)), False, False),
    ]

    def test_table(self):
        for ver, mdev, pci in self.TABLE:
            self.assertEqual((mdev, pci), (ver.meets(MDEV), ver.meets(PCI)),
                             str(ver))


class FromLibvirtTest(testtools.TestCase):

    def test_integers_as_libvirt_reports_them(self):
        ver = V.from_libvirt(9000000, 'QEMU', 8002002)
        self.assertEqual(V((9, 0, 0), 'QEMU', (8, 2, 2)), ver)
        self.assertEqual('libvirt 9.0.0 and QEMU 8.2.2', str(ver))
        self.assertEqual('libvirt 9.0.0 and hypervisor TEST 0.0.2 (not '
                         'QEMU)', str(V.from_libvirt(9000000, 'TEST', 2)))

    def test_bad_integers(self):
        for bad in (-1, '9000000', None, True, 1.5):
            self.assertRaises(exception.InvalidValue, V.from_libvirt, bad,
                              'QEMU', 1)


class DictTest(testtools.TestCase):

    def test_round_trip(self):
        ver = V((10, 1, 0), 'QEMU', (8, 2, 2))
        self.assertEqual(ver, V.from_dict(ver.to_dict()))

    BAD = [
        (None, 'versions', 'exactly libvirt'),
        ({'libvirt': [1, 2, 3], 'hypervisor': [1, 2, 3]}, 'versions',
         'exactly libvirt'),
        ({'libvirt': [1, 2], 'hypervisor_type': 'QEMU',
          'hypervisor': [1, 2, 3]}, 'versions.libvirt', '[major, minor'),
        ({'libvirt': [1, 2, 1000], 'hypervisor_type': 'QEMU',
          'hypervisor': [1, 2, 3]}, 'versions.libvirt', 'below 1000'),
        ({'libvirt': [1, 2, 3], 'hypervisor_type': 'QEMU',
          'hypervisor': [1, True, 3]}, 'versions.hypervisor', 'integers'),
        ({'libvirt': [1, 2, 3], 'hypervisor_type': '',
          'hypervisor': [1, 2, 3]}, 'versions.hypervisor_type', 'QEMU'),
    ]

    def test_bad_dicts_name_the_field(self):
        for data, field, rule in self.BAD:
            exc = self.assertRaises(exception.InvalidValue, V.from_dict,
                                    data)
            self.assertIn('Invalid %s ' % field, str(exc))
            self.assertIn(rule, str(exc))


class ProblemsTest(testtools.TestCase):

    def test_every_shortfall_is_named_with_the_versions(self):
        hosts = [('source', 'host1', V((8, 0, 0), 'QEMU', (6, 2, 0))),
                 ('destination', 'host2', V((9, 0, 0), 'QEMU', (8, 2, 0)))]
        self.assertEqual([
            'live migration of mdevs needs libvirt >= 8.6.0 and QEMU >= '
            '8.1.0; the source host host1 has libvirt 8.0.0 and QEMU 6.2.0',
            'live migration of PCI devices (vfio-pci variant drivers) needs '
            'libvirt >= 10.0.0 and QEMU >= 8.2.2; the source host host1 has '
            'libvirt 8.0.0 and QEMU 6.2.0',
            'live migration of PCI devices (vfio-pci variant drivers) needs '
            'libvirt >= 10.0.0 and QEMU >= 8.2.2; the destination host '
            'host2 has libvirt 9.0.0 and QEMU 8.2.0',
        ], versions.problems(hosts, [MDEV, PCI]))

    def test_hosts_that_meet_the_minimums_pass(self):
        new = V((10, 0, 0), 'QEMU', (8, 2, 2))
        self.assertEqual([], versions.problems(
            [('source', 'a', new), ('destination', 'b', new)], [MDEV, PCI]))
        self.assertEqual([], versions.problems([('source', 'a', new)], []))
