"""The libvirt seam, over the real libvirt and over the fake one.

Real errors come from libvirt's own test driver (``test:///default``), fake
ones from the fake libvirt module: both go through the same
:class:`~nova_pci_mdev.virt.libvirt.seam.Libvirt`.
"""

import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.virt.libvirt import seam


def real_error(call, *args):
    try:
        call(*args)
    except libvirt.libvirtError as exc:
        return exc
    raise AssertionError('%s did not fail' % call)


class RealSeamTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.libvirt = seam.real()
        self.conn = self.libvirt.open('test:///default')
        self.addCleanup(self.conn.close)

    def test_flags_are_libvirts(self):
        self.assertEqual(
            (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV,
             libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES,
             libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV),
            (self.libvirt.list_pci, self.libvirt.list_mdev_types,
             self.libvirt.list_mdev))
        self.assertEqual(
            self.libvirt.list_pci | self.libvirt.list_mdev_types
            | self.libvirt.list_mdev, self.libvirt.list_all)

    def test_a_missing_node_device_is_gone_and_translated(self):
        exc = real_error(self.conn.nodeDeviceLookupByName, 'pci_nope')
        self.assertTrue(self.libvirt.is_gone(exc))
        hyp = self.libvirt.translate(exc, 'pci_nope', 'lookup')
        self.assertIsInstance(hyp, exception.HypervisorError)
        self.assertEqual(libvirt.VIR_ERR_NO_NODE_DEVICE, hyp.kwargs['code'])
        self.assertEqual(
            'Hypervisor error on pci_nope: lookup failed: %s (libvirt error '
            'code %d)' % (exc, libvirt.VIR_ERR_NO_NODE_DEVICE), str(hyp))

    def test_other_exceptions_are_not_translated(self):
        for exc in (KeyError('x'), fakelibvirt.libvirtError('fake'),
                    exception.MdevError(uuid='u', parent='p', reason='r')):
            self.assertIsNone(self.libvirt.translate(exc, 'dev'), exc)
            self.assertFalse(self.libvirt.is_gone(exc), exc)

    def test_open_failure_names_the_uri(self):
        exc = self.assertRaises(exception.HypervisorError, self.libvirt.open,
                                'nosuchdriver:///x')
        self.assertIn('nosuchdriver:///x', str(exc))
        self.assertIn('open failed', str(exc))

    def test_a_closed_connection_is_lost(self):
        conn = self.libvirt.open('test:///default')
        conn.close()
        exc = real_error(self.conn.nodeDeviceLookupByName, 'pci_nope')
        self.assertTrue(self.libvirt.connection_lost(exc, conn))
        self.assertFalse(self.libvirt.connection_lost(exc, self.conn))


class FakeSeamTest(testtools.TestCase):
    """The fake libvirt implements the seam with its own class and codes."""

    def test_connection_lost_table(self):
        fake = fakelibvirt.FakeHost()
        lv = fake.libvirt
        table = [
            (fakelibvirt.VIR_ERR_NO_CONNECT, fakelibvirt.VIR_FROM_NODEDEV,
             True),
            (fakelibvirt.VIR_ERR_SYSTEM_ERROR, fakelibvirt.VIR_FROM_RPC,
             True),
            (fakelibvirt.VIR_ERR_INTERNAL_ERROR, fakelibvirt.VIR_FROM_REMOTE,
             True),
            (fakelibvirt.VIR_ERR_INTERNAL_ERROR, fakelibvirt.VIR_FROM_NODEDEV,
             False),
            (fakelibvirt.VIR_ERR_NO_NODE_DEVICE, fakelibvirt.VIR_FROM_RPC,
             False),
        ]
        conn = fake.connect()
        for code, domain, lost in table:
            exc = fakelibvirt.libvirtError('x', code, domain)
            self.assertEqual(lost, lv.connection_lost(exc, conn),
                             (code, domain))
        fake.drop_connections()
        exc = fakelibvirt.libvirtError('x', fakelibvirt.VIR_ERR_NO_SUPPORT)
        self.assertTrue(lv.connection_lost(exc, conn))

    def test_open_is_the_hosts_connect(self):
        fake = fakelibvirt.FakeHost('fake-1')
        conn = fake.libvirt.open('qemu:///system')
        self.assertEqual('fake-1', conn.getHostname())
        self.assertEqual(1, fake.calls['open'])

    def test_module_seam_opens_nothing(self):
        exc = self.assertRaises(exception.HypervisorError,
                                fakelibvirt.LIBVIRT.open, 'qemu:///system')
        self.assertEqual(fakelibvirt.VIR_ERR_NO_CONNECT, exc.kwargs['code'])

    def test_real_errors_are_not_the_fakes(self):
        exc = libvirt.libvirtError('real')
        self.assertIsNone(fakelibvirt.LIBVIRT.translate(exc, 'dev'))

    def test_reason_reads_the_same_for_both(self):
        exc = fakelibvirt.libvirtError('busy', fakelibvirt.VIR_ERR_NO_SUPPORT)
        self.assertEqual('create failed: busy (libvirt error code '
                         'VIR_ERR_NO_SUPPORT)',
                         fakelibvirt.LIBVIRT.reason(exc, 'create'))
        self.assertEqual('busy (libvirt error code VIR_ERR_NO_SUPPORT)',
                         fakelibvirt.LIBVIRT.reason(exc))

    def test_a_module_without_a_name_is_refused_at_once(self):
        class Partial:
            libvirtError = fakelibvirt.libvirtError
        self.assertRaises(AttributeError, seam.Libvirt, Partial)
