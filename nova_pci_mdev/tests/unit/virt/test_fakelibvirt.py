"""The fake libvirt host: flags, node-device XML, mdev lifecycle, faults.

Its XML is held against the real thing: every node device it prints is
validated with libvirt's installed ``nodedev.rng`` and loaded into libvirt's
test driver, whose ``listAllDevices`` must filter exactly like the fake.

Host used by most tests::

    computer
    +-- pci_0000_84_00_0  GPU 10de:1eb8, node 1, nvidia-35 x16, nvidia-36 x8
    |   +-- mdev 4b20d080-... (nvidia-35, active)
    +-- mtty              virtual, mtty-1 x4
    +-- pci_0000_81_00_0  PF 8086:1572, node 0, 2 VFs 0000:81:02.0-1
    +-- pci_0000_05_00_0  NVMe 144d:a808, no NUMA node
"""

import os
import shutil
import subprocess
import uuid as uuid_lib
from xml.etree import ElementTree

import fixtures
import testtools

from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.fixtures import opcount

try:
    import libvirt
except ImportError:  # pragma: no cover - libvirt-python is a dev dependency
    libvirt = None

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
U3 = '7e5a2c7d-2b3e-4f0f-9a51-3c1a6e0c9d42'
GPU = 'pci_0000_84_00_0'
PF = 'pci_0000_81_00_0'
VFS = ['pci_0000_81_02_0', 'pci_0000_81_02_1']
NVME = 'pci_0000_05_00_0'
MDEV1 = 'mdev_4b20d080_1b54_4048_85b3_a6a62d165c01_0000_84_00_0'
MTTY = 'mtty_mtty'   # libvirt 9.0's node name for the kernel's mtty
NODEDEV_RNG = '/usr/share/libvirt/schemas/nodedev.rng'


def build_host(**kwargs):
    return (fake.FakeHost('compute1', **kwargs)
            .add_mdev_parent('0000:84:00.0', numa_node=1,
                             types={'nvidia-35': 16,
                                    'nvidia-36': {'available': 8,
                                                  'name': 'GRID M60-1Q'}})
            .add_virtual_parent('mtty', types={'mtty-1': 4})
            .add_sriov_pf('0000:81:00.0', num_vfs=2, numa_node=0)
            .add_pci('0000:05:00.0')
            .add_mdev(U1, '0000:84:00.0', 'nvidia-35'))


def mdev_xml(parent=GPU, mdev_type='nvidia-35', uuid=U2):
    uuid_el = '<uuid>%s</uuid>' % uuid if uuid else ''
    return ("<device><parent>%s</parent><capability type='mdev'>"
            "<type id='%s'/>%s</capability></device>"
            % (parent, mdev_type, uuid_el))


def available(conn, node, mdev_type):
    root = ElementTree.fromstring(conn.nodeDeviceLookupByName(node).XMLDesc())
    for el in root.iter('type'):
        if el.get('id') == mdev_type:
            return int(el.findtext('availableInstances'))
    raise AssertionError('no type %s on %s' % (mdev_type, node))


class ListAllDevicesTest(testtools.TestCase):

    FLAGS = [
        (0, {'computer', GPU, MTTY, PF, NVME, MDEV1} | set(VFS)),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV,
         {GPU, PF, NVME} | set(VFS)),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES, {GPU, MTTY}),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV, {MDEV1}),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SYSTEM, {'computer'}),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV |
         fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES,
         {GPU, MTTY, MDEV1}),
        (fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_NET, set()),
    ]

    def test_flag_filtering(self):
        conn = build_host().connect()
        for flags, expected in self.FLAGS:
            got = {d.name() for d in conn.listAllDevices(flags)}
            self.assertEqual(expected, got, 'flags %#x' % flags)

    def test_active_inactive_filter_defined_mdevs(self):
        host = build_host()
        host.add_mdev(U2, '0000:84:00.0', 'nvidia-35', active=False,
                      persistent=True)
        conn = host.connect()
        mdev = fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV
        inactive = fake.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE
        active = fake.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
        self.assertEqual(2, len(conn.listAllDevices(mdev)))
        self.assertEqual([MDEV1], [
            d.name() for d in conn.listAllDevices(mdev | active)])
        self.assertEqual([host.device_name(U2)], [
            d.name() for d in conn.listAllDevices(mdev | inactive)])

    def test_list_caps_and_parent(self):
        conn = build_host().connect()
        cases = [(GPU, ['pci', 'mdev_types'], 'computer'),
                 (MTTY, ['mdev_types'], 'computer'),
                 (VFS[0], ['pci'], 'computer'),
                 (MDEV1, ['mdev'], GPU),
                 ('computer', ['system'], None)]
        for name, caps, parent in cases:
            dev = conn.nodeDeviceLookupByName(name)
            self.assertEqual((caps, parent), (dev.listCaps(), dev.parent()))

    def test_constants_are_libvirts_flags_but_not_its_error_codes(self):
        if libvirt is None:
            self.skipTest('libvirt-python is not installed')
        names = [n for n in dir(fake) if n.startswith('VIR_')]
        for name in names:
            if name.startswith(('VIR_ERR_', 'VIR_FROM_')):
                self.assertIsInstance(getattr(fake, name), str, name)
                self.assertNotEqual(getattr(libvirt, name),
                                    getattr(fake, name))
            else:
                self.assertEqual(getattr(libvirt, name), getattr(fake, name),
                                 name)
        self.assertFalse(issubclass(fake.libvirtError, libvirt.libvirtError))


class NodeDeviceXmlTest(testtools.TestCase):

    def _root(self, conn, name):
        return ElementTree.fromstring(
            conn.nodeDeviceLookupByName(name).XMLDesc(0))

    def test_pci_parent_vf_and_mdev_xml(self):
        conn = build_host().connect()
        gpu = self._root(conn, GPU)
        pci = gpu.find("capability[@type='pci']")
        self.assertEqual(('0x10de', '0x1eb8', '1'), (
            pci.find('vendor').get('id'), pci.find('product').get('id'),
            pci.find('numa').get('node')))
        types = pci.find("capability[@type='mdev_types']")
        self.assertEqual(
            [('nvidia-35', None, '15'), ('nvidia-36', 'GRID M60-1Q', '8')],
            [(t.get('id'), t.findtext('name'),
              t.findtext('availableInstances')) for t in types])
        vf = self._root(conn, VFS[1]).find(
            "capability/capability[@type='phys_function']/address")
        self.assertEqual({'domain': '0x0000', 'bus': '0x81', 'slot': '0x00',
                          'function': '0x0'}, vf.attrib)
        pf = self._root(conn, PF).find(
            "capability/capability[@type='virt_functions']")
        self.assertEqual(['0x0', '0x1'],
                         [a.get('function') for a in pf])
        mdev = self._root(conn, MDEV1)
        self.assertEqual((GPU, 'nvidia-35', U1), (
            mdev.findtext('parent'), mdev.find('capability/type').get('id'),
            mdev.findtext('capability/uuid')))
        self.assertIsNone(self._root(conn, NVME).find('capability/numa'))

    def test_virtual_parent_forms(self):
        host = (fake.FakeHost().add_virtual_parent('mtty', {'mtty-1': 4})
                .add_virtual_parent('mdpy', {'mdpy-1': 2}, form='flat',
                                    node_name='mdpy_mdpy'))
        conn = host.connect()
        nested = self._root(conn, MTTY)
        self.assertEqual('4', nested.findtext(
            "capability[@type='mdev_types']/capability[@type='mdev_types']"
            "/type/availableInstances"))
        flat = self._root(conn, 'mdpy_mdpy')
        self.assertEqual('mdpy-1', flat.find(
            "capability[@type='mdev_types']/type").get('id'))
        self.assertRaises(ValueError, host.add_virtual_parent, 'x', {}, None,
                          'other')

    def test_mdev_node_names_follow_the_libvirt_version(self):
        cases = [(9000000, '0000:84:00.0', MDEV1),
                 (7007000, 'mtty', 'mdev_' + U1.replace('-', '_') + '_mtty'),
                 (7006000, '0000:84:00.0', 'mdev_' + U1.replace('-', '_'))]
        for version, parent, expected in cases:
            host = (fake.FakeHost(lib_version=version)
                    .add_mdev_parent('0000:84:00.0', types={'nvidia-35': 2})
                    .add_virtual_parent('mtty', {'nvidia-35': 1})
                    .add_mdev(U1, parent, 'nvidia-35'))
            self.assertEqual(expected, host.device_name(U1), version)

    def test_xml_validates_against_libvirts_nodedev_schema(self):
        if not (shutil.which('xmllint') and os.path.exists(NODEDEV_RNG)):
            self.skipTest('xmllint or libvirt schemas not installed')
        host = build_host()
        host.add_mdev(U2, '0000:84:00.0', 'nvidia-35', active=False,
                      persistent=True)
        conn = host.connect()
        tmp = self.useFixture(fixtures.TempDir()).path
        for dev in conn.listAllDevices(0):
            if dev.name() == MTTY:
                continue  # top-level mdev_types: newer than libvirt 9
            path = os.path.join(tmp, dev.name() + '.xml')
            with open(path, 'w') as f:
                f.write(dev.XMLDesc(0))
            proc = subprocess.run(
                ['xmllint', '--noout', '--relaxng', NODEDEV_RNG, path],
                capture_output=True, text=True)
            self.assertEqual(0, proc.returncode, proc.stderr)

    def test_real_test_driver_lists_the_same_devices_per_flag(self):
        """The fake's XML, loaded into libvirt's test driver, filters the
        same way (except the virtual parent libvirt 9 cannot load)."""
        if libvirt is None:
            self.skipTest('libvirt-python is not installed')
        libvirt.registerErrorHandler(lambda *a: None, None)
        conn = build_host().connect()
        devices = [d for d in conn.listAllDevices(0) if d.name() != MTTY]
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'host.xml')
        with open(path, 'w') as f:
            f.write('<node>%s</node>' % ''.join(d.XMLDesc(0)
                                                for d in devices))
        real = libvirt.open('test://' + path)
        self.addCleanup(real.close)
        for flags, _ in ListAllDevicesTest.FLAGS:
            self.assertEqual(
                {d.name() for d in conn.listAllDevices(flags)} - {MTTY},
                {d.name() for d in real.listAllDevices(flags)},
                'flags %#x' % flags)


class MdevLifecycleTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = build_host()
        self.conn = self.host.connect()

    def test_create_and_destroy_update_available_instances(self):
        self.assertEqual(15, available(self.conn, GPU, 'nvidia-35'))
        dev = self.conn.nodeDeviceCreateXML(mdev_xml(), 0)
        self.assertEqual('mdev_%s_0000_84_00_0' % U2.replace('-', '_'),
                         dev.name())
        self.assertEqual(14, available(self.conn, GPU, 'nvidia-35'))
        self.assertEqual(8, available(self.conn, GPU, 'nvidia-36'))
        self.assertEqual((1, 0), (dev.isActive(), dev.isPersistent()))
        dev.destroy()
        self.assertEqual(15, available(self.conn, GPU, 'nvidia-35'))
        # a transient mdev vanishes when destroyed
        e = self.assertRaises(fake.libvirtError,
                              self.conn.nodeDeviceLookupByName, dev.name())
        self.assertEqual(fake.VIR_ERR_NO_NODE_DEVICE, e.get_error_code())

    def test_create_without_uuid_generates_one(self):
        dev = self.conn.nodeDeviceCreateXML(
            mdev_xml(parent=MTTY, mdev_type='mtty-1', uuid=None), 0)
        root = ElementTree.fromstring(dev.XMLDesc(0))
        uuid_lib.UUID(root.findtext('capability/uuid'))
        self.assertEqual(3, available(self.conn, MTTY, 'mtty-1'))

    def test_destroying_an_mdev_a_running_domain_holds_is_refused(self):
        # libvirt 9.0 on the real host (tools/realhost) refuses at once.
        dev = self.conn.nodeDeviceLookupByName(MDEV1)
        xml = ("<domain type='qemu'><name>g</name><devices><hostdev "
               "mode='subsystem' type='mdev' model='vfio-pci'><source>"
               "<address uuid='%s'/></source></hostdev></devices></domain>"
               % U1.upper())
        dom = self.conn.defineXML(xml)
        dom.create()
        e = self.assertRaises(fake.libvirtError, dev.destroy)
        self.assertEqual(fake.VIR_ERR_INTERNAL_ERROR, e.get_error_code())
        self.assertIn("Unable to destroy '%s': device in use" % MDEV1,
                      str(e))
        self.assertEqual(1, dev.isActive())
        dom.destroy()
        dev.destroy()
        self.assertNotIn(MDEV1, self.host.devices)

    def test_an_unloaded_parent_keeps_its_defined_mdevs_inactive(self):
        self.host.add_mdev(U2, 'mtty', 'mtty-1', persistent=True,
                           autostart=True)
        self.host.add_mdev(U3, 'mtty', 'mtty-1')
        name = self.host.device_name(U2)
        self.host.remove_device('mtty')             # rmmod mtty
        listed = {d.name(): d.isActive() for d in self.conn.listAllDevices(
            fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)}
        self.assertEqual({name: 0, MDEV1: 1}, listed)
        dev = self.conn.nodeDeviceLookupByName(name)
        e = self.assertRaises(fake.libvirtError, dev.create)
        self.assertIn("mdev parent device 'mtty_mtty'", str(e))
        self.host.add_virtual_parent('mtty', types={'mtty-1': 4})
        self.assertEqual(0, dev.isActive())         # no autostart then
        dev.create()
        self.assertEqual(1, dev.isActive())

    def test_mdev_xml_names_the_parent_address(self):
        root = ElementTree.fromstring(
            self.conn.nodeDeviceLookupByName(MDEV1).XMLDesc(0))
        self.assertEqual('0000:84:00.0', root.findtext(
            'capability/parent_addr'))

    def test_define_create_undefine_destroy(self):
        dev = self.conn.nodeDeviceDefineXML(mdev_xml(), 0)
        self.assertEqual((0, 1), (dev.isActive(), dev.isPersistent()))
        self.assertEqual(15, available(self.conn, GPU, 'nvidia-35'))
        dev.setAutostart(1)
        dev.create()
        self.assertEqual((1, 1, 1),
                         (dev.isActive(), dev.isPersistent(), dev.autostart()))
        self.assertEqual(14, available(self.conn, GPU, 'nvidia-35'))
        dev.undefine()          # active: becomes transient
        self.assertEqual((1, 0), (dev.isActive(), dev.isPersistent()))
        dev.destroy()
        self.assertEqual(15, available(self.conn, GPU, 'nvidia-35'))
        self.assertNotIn(dev.name(), self.host.devices)

    def test_create_xml_starts_a_defined_inactive_mdev(self):
        defined = self.conn.nodeDeviceDefineXML(mdev_xml(), 0)
        started = self.conn.nodeDeviceCreateXML(mdev_xml(), 0)
        self.assertEqual(defined.name(), started.name())
        self.assertEqual((1, 1), (started.isActive(), started.isPersistent()))

    def test_reboot_keeps_only_autostarted_persistent_mdevs(self):
        self.conn.nodeDeviceDefineXML(mdev_xml(), 0).setAutostart(1)
        self.conn.nodeDeviceDefineXML(mdev_xml(
            uuid='11111111-2222-3333-4444-555555555555'), 0)
        self.host.reboot()
        mdevs = {d.name(): d.isActive() for d in self.conn.listAllDevices(
            fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)}
        self.assertEqual({self.host.device_name(U2): 1,
                          'mdev_11111111_2222_3333_4444_555555555555_0000_84'
                          '_00_0': 0}, mdevs)
        self.assertEqual(15, available(self.conn, GPU, 'nvidia-35'))

    ERRORS = [
        ('no room', mdev_xml(parent=MTTY, mdev_type='mtty-1'), 5,
         fake.VIR_ERR_OPERATION_FAILED),
        ('unknown parent', mdev_xml(parent='pci_0000_99_00_0'), 1,
         fake.VIR_ERR_CONFIG_UNSUPPORTED),
        ('an address, not a node name', mdev_xml(parent='mtty',
                                                 mdev_type='mtty-1'), 1,
         fake.VIR_ERR_CONFIG_UNSUPPORTED),
        ('not a parent', mdev_xml(parent=NVME), 1,
         fake.VIR_ERR_NO_NODE_DEVICE),
        ('unsupported type', mdev_xml(mdev_type='nvidia-99'), 1,
         fake.VIR_ERR_OPERATION_FAILED),
        ('already active', mdev_xml(uuid=U1), 1,
         fake.VIR_ERR_OPERATION_INVALID),
        ('bad uuid', mdev_xml(uuid='not-a-uuid'), 1, fake.VIR_ERR_XML_ERROR),
        ('no capability', '<device><parent>%s</parent></device>' % GPU, 1,
         fake.VIR_ERR_XML_ERROR),
        ('malformed', '<device>', 1, fake.VIR_ERR_XML_ERROR),
        ('doctype', '<!DOCTYPE d [<!ENTITY e "x">]><device>&e;</device>', 1,
         fake.VIR_ERR_XML_ERROR),
    ]

    def test_create_errors_leave_nothing_behind(self):
        for label, xml, attempts, code in self.ERRORS:
            host = build_host()
            conn = host.connect()
            before = set(host.devices)
            errors = []
            for i in range(attempts):
                body = xml.replace(U2, str(uuid_lib.UUID(int=i + 1)))
                try:
                    conn.nodeDeviceCreateXML(body, 0)
                except fake.libvirtError as exc:
                    errors.append(exc.get_error_code())
            self.assertEqual([code], errors, label)
            self.assertEqual(attempts - 1,
                             len(set(host.devices) - before), label)

    def test_version_gates(self):
        cases = [(6004000, 'nodeDeviceCreateXML'),
                 (7002000, 'nodeDeviceDefineXML')]
        for version, method in cases:
            conn = fake.FakeHost(lib_version=version).add_mdev_parent(
                '0000:84:00.0', types={'nvidia-35': 2}).connect()
            e = self.assertRaises(fake.libvirtError, getattr(conn, method),
                                  mdev_xml(), 0)
            self.assertEqual(fake.VIR_ERR_NO_SUPPORT, e.get_error_code())

    def test_invalid_operations(self):
        dev = self.conn.nodeDeviceLookupByName(MDEV1)
        cases = [(dev.create, fake.VIR_ERR_OPERATION_INVALID),
                 (dev.undefine, fake.VIR_ERR_OPERATION_INVALID),
                 (lambda: dev.setAutostart(1), fake.VIR_ERR_OPERATION_INVALID),
                 (self.conn.nodeDeviceLookupByName(GPU).destroy,
                  fake.VIR_ERR_INVALID_ARG)]
        for call, code in cases:
            e = self.assertRaises(fake.libvirtError, call)
            self.assertEqual(code, e.get_error_code())

    def test_hot_unplug_removes_parent_and_its_mdevs(self):
        handle = self.conn.nodeDeviceLookupByName(GPU)
        self.host.remove_device('0000:84:00.0')
        names = {d.name() for d in self.conn.listAllDevices(0)}
        self.assertEqual(set(), {GPU, MDEV1} & names)
        e = self.assertRaises(fake.libvirtError, handle.XMLDesc, 0)
        self.assertEqual(fake.VIR_ERR_NO_NODE_DEVICE, e.get_error_code())
        self.host.remove_device(VFS[0])
        self.assertNotIn(VFS[0], self.host.devices)


class FaultInjectionTest(testtools.TestCase):

    def test_fail_next_n_calls_then_recover(self):
        host = build_host().fail_next('nodeDeviceCreateXML', times=2,
                                      code=fake.VIR_ERR_OPERATION_FAILED)
        conn = host.connect()
        for _ in range(2):
            e = self.assertRaises(fake.libvirtError, conn.nodeDeviceCreateXML,
                                  mdev_xml(), 0)
            self.assertEqual(fake.VIR_ERR_OPERATION_FAILED, e.get_error_code())
        self.assertEqual(15, available(conn, GPU, 'nvidia-35'))
        conn.nodeDeviceCreateXML(mdev_xml(), 0)
        self.assertEqual(14, available(conn, GPU, 'nvidia-35'))
        self.assertEqual(3, host.calls['nodeDeviceCreateXML'])

    def test_fault_targets_one_device_method(self):
        host = build_host().fail_next('NodeDevice.XMLDesc', target=VFS[0])
        conn = host.connect()
        conn.nodeDeviceLookupByName(VFS[1]).XMLDesc(0)
        self.assertRaises(fake.libvirtError,
                          conn.nodeDeviceLookupByName(VFS[0]).XMLDesc, 0)
        conn.nodeDeviceLookupByName(VFS[0]).XMLDesc(0)

    def test_dropped_connection_and_reconnect(self):
        host = build_host()
        conn = host.connect()
        dev = conn.nodeDeviceLookupByName(GPU)
        host.drop_connections()
        self.assertEqual(0, conn.isAlive())
        for call in (conn.getHostname, lambda: conn.listAllDevices(0),
                     dev.XMLDesc):
            e = self.assertRaises(fake.libvirtError, call)
            self.assertEqual((fake.VIR_ERR_INTERNAL_ERROR, fake.VIR_FROM_RPC),
                             (e.get_error_code(), e.get_error_domain()))
        self.assertEqual('compute1', host.connect().getHostname())

    def test_open_can_fail(self):
        host = build_host().fail_next('open', code=fake.VIR_ERR_SYSTEM_ERROR)
        e = self.assertRaises(fake.libvirtError, host.connect)
        self.assertEqual(fake.VIR_ERR_SYSTEM_ERROR, e.get_error_code())
        self.assertEqual(1, host.connect().isAlive())


class HostInfoAndDomainsTest(testtools.TestCase):

    def test_identity_and_capabilities(self):
        conn = fake.FakeHost('node7', lib_version=8000000, hv_version=7002000,
                             cells=2, cpus_per_cell=2).connect()
        self.assertEqual(('node7', 8000000, 7002000), (
            conn.getHostname(), conn.getLibVersion(), conn.getVersion()))
        caps = ElementTree.fromstring(conn.getCapabilities())
        cells = caps.findall('host/topology/cells/cell')
        self.assertEqual(
            [('0', ['0', '1'], {'0'}), ('1', ['2', '3'], {'1'})],
            [(c.get('id'), [p.get('id') for p in c.iter('cpu')],
              {p.get('socket_id') for p in c.iter('cpu')}) for c in cells])

    def test_host_without_numa_cells(self):
        caps = ElementTree.fromstring(
            fake.FakeHost(cells=0).connect().getCapabilities())
        self.assertEqual('0', caps.find('host/topology/cells').get('num'))
        custom = fake.FakeHost().set_numa_cells([(3, 1, [6, 7], 1024)])
        caps = ElementTree.fromstring(custom.connect().getCapabilities())
        self.assertEqual(['3'], [c.get('id') for c in caps.iter('cell')])

    def test_domains_are_stored_not_validated(self):
        conn = build_host().connect()
        xml = ("<domain type='kvm'><name>i1</name><uuid>%s</uuid>"
               "<devices><hostdev type='nonsense'/></devices></domain>" % U1)
        dom = conn.defineXMLFlags(xml, fake.VIR_DOMAIN_DEFINE_VALIDATE)
        self.assertEqual((U1, xml), (dom.UUIDString(), dom.XMLDesc(0)))
        self.assertEqual(['i1'], [d.name() for d in conn.listAllDomains()])
        self.assertEqual(U1, conn.lookupByName('i1').UUIDString())
        e = self.assertRaises(fake.libvirtError, conn.defineXMLFlags,
                              xml.replace(U1, U2), 0)
        self.assertEqual(fake.VIR_ERR_OPERATION_FAILED, e.get_error_code())
        dom.undefine()
        e = self.assertRaises(fake.libvirtError, conn.lookupByName, 'i1')
        self.assertEqual(fake.VIR_ERR_NO_DOMAIN, e.get_error_code())


class GeneratedHostTest(testtools.TestCase):

    def test_generation_and_listing_are_linear(self):
        def work(n):
            def build_and_list():
                host = fake.FakeHost.generate(n)
                return host, host.connect().listAllDevices(
                    fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
            return build_and_list
        # Calls per device stay flat from 1,000 to 4,000 devices.
        self.assertLess(opcount.growth(work, 1000, 4000), 1.2)

    def test_ten_thousand_devices(self):
        host = fake.FakeHost.generate(10000)
        conn = host.connect()
        listed = conn.listAllDevices(
            fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
        self.assertEqual(10001, len(host.devices))
        mdevs = conn.listAllDevices(
            fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)
        parents = conn.listAllDevices(
            fake.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES)
        self.assertEqual((1000, 1000, 9000),
                         (len(mdevs), len(parents), len(listed)))
        numa = {ElementTree.fromstring(d.XMLDesc(0)).findtext(
            'capability/numa') is None for d in parents[:4]}
        self.assertEqual({False}, numa)

    def test_exact_counts_for_odd_sizes(self):
        for size in (1, 2, 3, 11, 97):
            self.assertEqual(size + 1,
                             len(fake.FakeHost.generate(size).devices), size)
