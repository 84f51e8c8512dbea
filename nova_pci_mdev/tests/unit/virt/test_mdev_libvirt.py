"""LibvirtNodeDeviceBackend on the project's fake libvirt, plus the
node-device XML checked by the real libvirt parser (test driver).

Host used by most tests::

    pci_0000_84_00_0  nvidia-35 x2, nvidia-36 x1
    mtty              mtty-1 x2          (virtual parent)

The fake's error codes are symbolic and its class is not libvirt's, so
these tests also prove the backend finds the error class through the
connection instead of importing ``libvirt``.
"""

import xml.etree.ElementTree as ET

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend as mdev_libvirt

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
GPU = '0000:84:00.0'
GPU_NODE = 'pci_0000_84_00_0'


def make_host(lib_version=9000000, mtty_node=None):
    return (fakelibvirt.FakeHost(lib_version=lib_version)
            .add_mdev_parent(GPU, types={'nvidia-35': 2, 'nvidia-36': 1})
            .add_virtual_parent('mtty', types={'mtty-1': 2},
                                node_name=mtty_node))


def mdevs_of(host):
    """``{uuid: (parent address, type, persistent, autostart)}`` of the
    active mdevs, as the fake host holds them."""
    return {d.uuid: (host.devices[d.parent].address, d.mdev_type,
                     bool(d.persistent), bool(d.autostart))
            for d in host.devices.values() if d.kind == 'mdev' and d.active}


class TestXml(testtools.TestCase):

    def test_device_xml(self):
        root = ET.fromstring(
            mdev_libvirt.mdev_device_xml(U1.upper(), GPU_NODE, 'nvidia-35'))
        self.assertEqual('device', root.tag)
        self.assertEqual(GPU_NODE, root.findtext('parent'))
        cap = root.find('capability')
        self.assertEqual('mdev', cap.get('type'))
        self.assertEqual('nvidia-35', cap.find('type').get('id'))
        self.assertEqual(U1, cap.findtext('uuid'))

    def test_names_cannot_inject_xml(self):
        for args in [(U1, GPU_NODE, "x'/><evil a='"),
                     (U1, 'mtty<a/>', 't'), ('<uuid/>', GPU_NODE, 't'),
                     (U1, GPU_NODE, 'a&amp;b'), (U1, '../mtty', 't')]:
            self.assertRaises(exception.Invalid,
                              mdev_libvirt.mdev_device_xml, *args)

    def test_pci_node_name(self):
        self.assertEqual(GPU_NODE, nodenames.pci_node_name(GPU))

    def test_real_libvirt_parses_our_xml(self):
        try:
            import libvirt
        except ImportError:
            self.skipTest('libvirt-python not installed')
        libvirt.registerErrorHandler(lambda *a: None, None)
        conn = libvirt.open('test:///default')
        self.addCleanup(conn.close)
        good = mdev_libvirt.mdev_device_xml(U1, GPU_NODE, 'nvidia-35')
        broken = good.replace(' id="nvidia-35"', '')
        # The test driver parses the XML, then refuses anything that is
        # not a vHBA: reaching that refusal means the XML parsed.
        errors = {}
        for label, xml in [('good', good), ('broken', broken)]:
            try:
                conn.nodeDeviceCreateXML(xml, 0)
            except libvirt.libvirtError as exc:
                errors[label] = exc.get_error_message()
        self.assertIn('fibre channel', errors['good'])
        self.assertIn('type id', errors['broken'])
        # and the real seam (the default) translates the real error
        backend = mdev_libvirt.LibvirtNodeDeviceBackend(conn)
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, GPU, 'nvidia-35')
        self.assertIn(U1, str(exc))
        self.assertIn('fibre channel', str(exc))
        self.assertEqual({}, backend.list())


class TestLibvirtBackend(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())

    def world(self, **kwargs):
        host = make_host(**kwargs)
        return host, mdev_libvirt.LibvirtNodeDeviceBackend(
            host.connect(), libvirt=host.libvirt)

    def test_create_persistent_with_autostart(self):
        host, backend = self.world()
        backend.create(U1, GPU, 'nvidia-35')
        self.assertEqual({U1: (GPU, 'nvidia-35', True, True)},
                         mdevs_of(host))
        self.assertEqual({U1: (U1, GPU, 'nvidia-35')},
                         {u: tuple(i) for u, i in backend.list().items()})
        self.assertEqual(1, backend.available(GPU, 'nvidia-35'))
        host.reboot()
        self.assertEqual({U1}, set(backend.list()))

    def test_old_libvirt_creates_transient_only(self):
        host, backend = self.world(lib_version=7002000)
        backend.create(U1, 'mtty', 'mtty-1')
        self.assertEqual(0, host.calls['nodeDeviceDefineXML'])
        self.assertEqual({U1: ('mtty', 'mtty-1', False, False)},
                         mdevs_of(host))
        self.assertEqual({U1}, set(backend.list()))     # mdev_<uuid> names
        backend.remove(U1)
        self.assertEqual({}, mdevs_of(host))

    def test_virtual_parent_with_another_node_name(self):
        host, backend = self.world(mtty_node='mtty_node')
        backend.create(U1, 'mtty', 'mtty-1')
        self.assertEqual('mtty_node',
                         host.devices[host.device_name(U1)].parent)
        self.assertEqual({U1: (U1, 'mtty', 'mtty-1')},
                         {u: tuple(i) for u, i in backend.list().items()})
        self.assertEqual(1, backend.available('mtty', 'mtty-1'))

    def test_an_unloaded_virtual_parent_is_named_not_guessed(self):
        # Found by tools/realhost: with mtty unloaded libvirt 9.0 lists no
        # mtty_mtty; passing the address 'mtty' as a node name only gave
        # "invalid parent device 'mtty'".
        host, cached = self.world()
        self.assertEqual(2, cached.available('mtty', 'mtty-1'))
        host.remove_device('mtty')
        fresh = mdev_libvirt.LibvirtNodeDeviceBackend(host.connect())
        for backend, calls in ((fresh, 0), (cached, 1)):
            before = host.calls['nodeDeviceCreateXML']
            exc = self.assertRaises(exception.MdevError, backend.create, U1,
                                    'mtty', 'mtty-1')
            self.assertEqual('ENODEV', exc.kwargs['errno'])
            for part in (U1, 'mtty', 'libvirt lists no mdev parent'):
                self.assertIn(part, str(exc))
            self.assertEqual(calls,
                             host.calls['nodeDeviceCreateXML'] - before)
            exc = self.assertRaises(exception.MdevTypeError,
                                    backend.available, 'mtty', 'mtty-1')
            self.assertEqual('ENODEV', exc.kwargs['errno'])
        self.assertEqual({}, mdevs_of(host))

    def test_remove_of_an_mdev_a_running_domain_holds_is_refused(self):
        host, backend = self.world()
        backend.create(U1, 'mtty', 'mtty-1')
        conn = host.connect()
        dom = conn.defineXML(
            "<domain type='qemu'><name>g</name><devices><hostdev "
            "mode='subsystem' type='mdev'><source><address uuid='%s'/>"
            "</source></hostdev></devices></domain>" % U1)
        dom.create()
        exc = self.assertRaises(exception.MdevError, backend.remove, U1)
        for part in (U1, 'mtty', 'device in use'):
            self.assertIn(part, str(exc))
        self.assertEqual({U1}, set(backend.list()))
        dom.destroy()
        backend.remove(U1)
        self.assertEqual({}, backend.list())

    def test_create_starts_defined_inactive_mdev(self):
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-35', active=False, persistent=True)
        self.assertEqual({}, backend.list())
        backend.create(U1, GPU, 'nvidia-35')
        self.assertEqual({U1}, set(backend.list()))
        self.assertEqual(0, host.calls['nodeDeviceCreateXML'])
        self.assertEqual(1, host.calls['NodeDevice.create'])

    def test_create_refuses_uuid_in_use(self):
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-36')
        host.add_mdev(U2, 'mtty', 'mtty-1', active=False, persistent=True)
        for uuid, other in ((U1, 'nvidia-36'), (U2, 'mtty-1')):
            exc = self.assertRaises(exception.MdevError, backend.create,
                                    uuid, GPU, 'nvidia-35')
            self.assertEqual('EEXIST', exc.kwargs['errno'])
            self.assertIn(other, str(exc))
        self.assertEqual(0, host.calls['nodeDeviceCreateXML'])

    def test_create_error_names_device(self):
        host, backend = self.world()
        host.fail_next('nodeDeviceCreateXML', message='parent busy')
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, GPU, 'nvidia-35')
        for part in (U1, GPU, GPU_NODE, 'nvidia-35', 'nodeDeviceCreateXML',
                     'parent busy'):
            self.assertIn(part, str(exc))
        self.assertEqual({}, mdevs_of(host))

    def test_no_room_is_an_mdev_error(self):
        host, backend = self.world()
        backend.create(U1, GPU, 'nvidia-36')
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U2, GPU, 'nvidia-36')
        self.assertIn('no available instance', str(exc))
        self.assertEqual(0, backend.available(GPU, 'nvidia-36'))

    def test_define_failure_leaves_nothing(self):
        host, backend = self.world()
        host.fail_next('nodeDeviceDefineXML', message='mdevctl said no')
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, GPU, 'nvidia-35')
        self.assertIn('mdevctl said no', str(exc))
        self.assertEqual({}, mdevs_of(host))
        self.assertEqual(2, host.available_instances(GPU, 'nvidia-35'))

    def test_define_and_destroy_failure_names_leftover(self):
        host, backend = self.world()
        host.fail_next('nodeDeviceDefineXML', message='mdevctl said no')
        host.fail_next('NodeDevice.destroy', message='busy')
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, GPU, 'nvidia-35')
        self.assertEqual([U1], exc.kwargs['left_behind'])
        self.assertIn('busy', str(exc))

    def test_autostart_failure_is_not_fatal(self):
        host, backend = self.world()
        host.fail_next('NodeDevice.setAutostart',
                       message='no autostart for you')
        backend.create(U1, GPU, 'nvidia-35')
        self.assertEqual({U1: (GPU, 'nvidia-35', True, False)},
                         mdevs_of(host))
        self.assertIn('no autostart for you', self.log.output)

    def test_remove_persistent_transient_and_inactive(self):
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-35', persistent=True, autostart=True)
        host.add_mdev(U2, 'mtty', 'mtty-1')
        backend.remove(U1)
        backend.remove(U2.upper())
        host.add_mdev(U1, GPU, 'nvidia-36', active=False, persistent=True)
        backend.remove(U1)
        self.assertEqual([], [d for d in host.devices.values()
                              if d.kind == 'mdev'])
        self.assertEqual(2, host.available_instances(GPU, 'nvidia-35'))

    def test_remove_errors(self):
        host, backend = self.world()
        self.assertRaises(exception.MdevNotFound, backend.remove, U1)
        host.add_mdev(U1, GPU, 'nvidia-35', persistent=True)
        host.fail_next('NodeDevice.destroy',
                       message='device in use by domain')
        exc = self.assertRaises(exception.MdevError, backend.remove, U1)
        for part in (U1, GPU, host.device_name(U1),
                     'device in use by domain'):
            self.assertIn(part, str(exc))
        self.assertEqual({U1}, set(backend.list()))

    def test_available_errors(self):
        host, backend = self.world()
        self.assertEqual(2, backend.available('mtty', 'mtty-1'))
        exc = self.assertRaises(exception.MdevTypeError, backend.available,
                                GPU, 'nvidia-99')
        self.assertIn('nvidia-99', str(exc))
        exc = self.assertRaises(exception.MdevTypeError, backend.available,
                                '0000:85:00.0', 'nvidia-35')
        self.assertIn('pci_0000_85_00_0', str(exc))

    def test_list_error_is_hypervisor_error(self):
        host, backend = self.world()
        host.fail_next('listAllDevices', message='connection lost')
        exc = self.assertRaises(exception.HypervisorError, backend.list)
        self.assertIn('connection lost', str(exc))

    def test_list_skips_unreadable_devices(self):
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-35')
        # node name and <uuid> disagree: nodedev refuses it
        host.add_mdev(U2, 'mtty', 'mtty-1',
                      node_name='mdev_' + U1.replace('-', '_') + '_x')
        self.assertEqual({U1}, set(backend.list()))
        self.assertIn('does not match', self.log.output)

    def test_list_skips_a_device_that_vanished_while_listing(self):
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-35')
        host.add_mdev(U2, GPU, 'nvidia-35')
        gone = 'mdev_%s_%s' % (U2.replace('-', '_'),
                               GPU.replace(':', '_').replace('.', '_'))
        host.fail_next('NodeDevice.XMLDesc', target=gone,
                       code=fakelibvirt.VIR_ERR_NO_NODE_DEVICE)
        self.assertEqual({U1}, set(backend.list()))

    def test_list_raises_when_describing_fails_otherwise(self):
        # A dead connection must not read as "no mdevs": the manager would
        # try to recreate mdevs that exist.
        host, backend = self.world()
        host.add_mdev(U1, GPU, 'nvidia-35')
        host.fail_next('NodeDevice.XMLDesc', message='client socket closed')
        exc = self.assertRaises(exception.HypervisorError, backend.list)
        self.assertIn('client socket closed', str(exc))

    def test_version_error_creates_nothing(self):
        host, backend = self.world()
        host.fail_next('getLibVersion', message='gone')
        self.assertRaises(exception.HypervisorError, backend.create,
                          U1, GPU, 'nvidia-35')
        self.assertEqual({}, mdevs_of(host))
