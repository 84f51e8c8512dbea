"""Discovery through the real libvirt test driver and a connection double.

The world used by most tests::

    computer
    |-- pci_0000_00_1f_6   type-PCI  8086:15b8   no NUMA node
    |-- pci_0000_81_00_0   type-PF   8086:1528   node 0
    |   `-- pci_0000_81_10_0  type-VF  8086:1515  node 0
    |-- pci_0000_84_00_0   mdev-pf   10de:1eb8   node 0  nvidia-222 (2 more)
    |   |-- mdev A  nvidia-222  (libvirt >= 7.7 name, <uuid>)
    |   `-- mdev B  nvidia-222  (old name, uuid only in the name)
    |-- pci_0000_85_00_0   mdev-pf   10de:1eb8   node 1  nvidia-222 (3 more)
    |   `-- mdev C  nvidia-223  (a type the parent does not expose)
    |-- pci_0000_00_02_0   mdev-pf   8086:3e92   GVT-g, no enabled type
    `-- mtty_mtty          mdev-pf   virtual     mtty-1 (2 more)  [double only]
        `-- mdev D  mtty-1

Enabled types: nvidia-222 and mtty-1, neither with device_addresses.
"""

import json
import os

import fixtures
import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.tests.fixtures import host_doubles
from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import records as records_mod
from nova_pci_mdev.virt.libvirt import slots

NODE = 'cn1'
A = '4b20d080-1b54-4048-85b3-a6a62d165c01'
B = '5b20d080-1b54-4048-85b3-a6a62d165c02'
C = '6b20d080-1b54-4048-85b3-a6a62d165c03'
D = '7b20d080-1b54-4048-85b3-a6a62d165c04'
ORPHAN = '8b20d080-1b54-4048-85b3-a6a62d165c05'
GPU1, GPU2, IGPU = '0000:84:00.0', '0000:85:00.0', '0000:00:02.0'


# -- settings stand-in (the conf helper's Settings has the same surface) ---


# -- connection double -----------------------------------------------------


def double_host(conn, **kwargs):
    """A Host on a double connection, with the fake libvirt's seam."""
    return host_mod.Host(conn, libvirt=fakelibvirt.LIBVIRT, **kwargs)


# -- the world -------------------------------------------------------------

def gpu1_xml(available=2):
    return X.gpu(GPU1, [('nvidia-222', 'GRID T4-1B', available),
                        ('nvidia-223', 'GRID T4-2B', 1)], numa=0)


def world_devices(gpu1_available=2, extra_mdevs=()):
    """(name, xml, caps) of the world, without mtty."""
    devices = [
        ('pci_0000_00_1f_6', X.pci('0000:00:1f.6', product='15b8'),
         ('pci',)),
        ('pci_0000_81_00_0', X.pf('0000:81:00.0', ['0000:81:10.0'], numa=0),
         ('pci',)),
        ('pci_0000_81_10_0', X.vf('0000:81:10.0', '0000:81:00.0',
                                  product='1515', numa=0), ('pci',)),
        ('pci_0000_84_00_0', gpu1_xml(gpu1_available),
         ('pci', 'mdev_types')),
        ('pci_0000_85_00_0', X.gpu(GPU2, [('nvidia-222', None, 3),
                                          ('nvidia-223', None, 0)], numa=1),
         ('pci', 'mdev_types')),
        ('pci_0000_00_02_0', X.gpu(IGPU, [('i915-GVTg_V5_4', None, 2)],
                                   vendor='8086', product='3e92'),
         ('pci', 'mdev_types')),
        (X.mdev_name(A, 'pci_0000_84_00_0'),
         X.mdev(A, 'pci_0000_84_00_0', 'nvidia-222'), ('mdev',)),
        (X.mdev_name(B, 'pci_0000_84_00_0', new_name=False),
         X.mdev(B, 'pci_0000_84_00_0', 'nvidia-222', new_name=False,
                with_uuid=False), ('mdev',)),
        (X.mdev_name(C, 'pci_0000_85_00_0'),
         X.mdev(C, 'pci_0000_85_00_0', 'nvidia-223'), ('mdev',)),
    ]
    for uuid in extra_mdevs:
        devices.append((X.mdev_name(uuid, 'pci_0000_84_00_0'),
                        X.mdev(uuid, 'pci_0000_84_00_0', 'nvidia-222'),
                        ('mdev',)))
    return devices


MTTY_DEVICES = [
    ('mtty_mtty', X.virtual_parent('mtty_mtty', 'mtty',
                                   [('mtty-1', 'Single port serial', 2)]),
     ('mdev_types',)),
    (X.mdev_name(D, 'mtty_mtty'), X.mdev(D, 'mtty_mtty', 'mtty-1'),
     ('mdev',)),
]


def seq(parent, mdev_type, *indexes, node=NODE):
    return [slots.slot_uuid(node, parent, mdev_type, i) for i in indexes]


def _device(record):
    from nova_pci_mdev import objects
    from nova_pci_mdev.objects import pci_device
    objects.register_all()
    return pci_device.PciDevice.create(record)


def _new_slots(before, after, parent):
    """(slots the tracker would make on ``parent`` before the creation of
    its first one, after it: the created one plus the rest)."""
    def made(found):
        by_address = {r['address']: r for r in found}
        dev = _device(by_address[parent])
        return [r['address'] for r in records_mod.SlotFactory(NODE).records(
            dev, set(by_address), int(dev.extra_info.get('creatable', 0)))]
    was, now = made(before), made(after)
    return was, was[:1] + now


def summary(records):
    """One comparable tuple per record; a parent's last item is the number
    of slots it can still create (None: none)."""
    return [(r['address'], r['dev_type'], r['vendor_id'], r['product_id'],
             r['numa_node'], r['parent_addr'], r['mdev_type'],
             r['extra_info'].get('mdev_exists'),
             r['extra_info'].get('mdev_exposed'),
             r['extra_info'].get('creatable')) for r in records]


def expected_world(with_mtty=False):
    """Slots still to create are counted on their parent (issue 15)."""
    t4 = ('10de', '1eb8')
    rows = [
        ('0000:00:02.0', 'mdev-pf', '8086', '3e92', None, None, None, None,
         None, None),
        ('0000:00:1f.6', 'type-PCI', '8086', '15b8', None, None, None, None,
         None, None),
        ('0000:81:00.0', 'type-PF', '8086', '1528', 0, None, None, None,
         None, None),
        ('0000:81:10.0', 'type-VF', '8086', '1515', 0, '0000:81:00.0', None,
         None, None, None),
        (GPU1, 'mdev-pf') + t4 + (0, None, 'nvidia-222', None, None, '2'),
        (A, 'mdev-vf') + t4 + (0, GPU1, 'nvidia-222', 'true', 'true', None),
        (B, 'mdev-vf') + t4 + (0, GPU1, 'nvidia-222', 'true', 'true', None),
        (GPU2, 'mdev-pf') + t4 + (1, None, 'nvidia-222', None, None, '3'),
        (C, 'mdev-vf') + t4 + (1, GPU2, 'nvidia-223', 'true', 'false',
                               None),
    ]
    if with_mtty:
        rows.append(('mtty', 'mdev-pf', '', '', None, None, 'mtty-1', None,
                     None, '2'))
        rows.append((D, 'mdev-vf', '', '', None, 'mtty', 'mtty-1', 'true',
                     'true', None))
    return rows


class _Base(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def real_host(self, devices, name='host.xml', nodename=NODE):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as handle:
            handle.write(X.host(*[xml for _, xml, _ in devices]))
        host = host_mod.connect('test://' + path, nodename=nodename)
        self.addCleanup(host.connection.close)
        return host

    def double(self, devices, **kwargs):
        conn = host_doubles.DoubleConnection(**kwargs)
        for name, xml, caps in devices:
            conn.add(name, xml, *caps)
        return conn


class RealDriverDiscoveryTest(_Base):

    def test_world(self):
        host = self.real_host(world_devices())
        records = host.discover(host_doubles.DEFAULT_SETTINGS)
        self.assertEqual(expected_world(), summary(records))

    def test_record_details(self):
        by_address = {r['address']: r for r in self.real_host(
            world_devices()).discover(host_doubles.DEFAULT_SETTINGS)}
        self.assertEqual({
            'address': '0000:81:10.0', 'vendor_id': '8086',
            'product_id': '1515', 'dev_type': 'type-VF', 'numa_node': 0,
            'parent_addr': '0000:81:00.0', 'mdev_type': None,
            'label': 'label_8086_1515', 'dev_id': 'pci_0000_81_10_0',
            'extra_info': {}}, by_address['0000:81:10.0'])
        self.assertEqual({
            'address': GPU1, 'vendor_id': '10de', 'product_id': '1eb8',
            'dev_type': 'mdev-pf', 'numa_node': 0, 'parent_addr': None,
            'mdev_type': 'nvidia-222', 'label': 'label_10de_1eb8',
            'dev_id': 'pci_0000_84_00_0',
            'extra_info': {'supported_mdev_types': 'nvidia-222,nvidia-223',
                           'resource_class': 'VGPU', 'creatable': '2'}
        }, by_address[GPU1])
        self.assertEqual(X.mdev_name(A, 'pci_0000_84_00_0'),
                         by_address[A]['dev_id'])
        self.assertEqual(X.mdev_name(B, 'pci_0000_84_00_0', False),
                         by_address[B]['dev_id'])
        # A slot still to create, as the tracker makes it when claimed.
        (new,) = records_mod.SlotFactory(NODE).records(
            _device(by_address[GPU1]), set(by_address), 1)
        self.assertEqual({
            'address': seq(GPU1, 'nvidia-222', 0)[0], 'vendor_id': '10de',
            'product_id': '1eb8', 'dev_type': 'mdev-vf', 'numa_node': 0,
            'parent_addr': GPU1, 'mdev_type': 'nvidia-222',
            'label': 'label_10de_1eb8', 'dev_id': None,
            'extra_info': {'mdev_exists': 'false', 'mdev_exposed': 'true'}},
            new)
        self.assertNotIn('resource_class', by_address[IGPU]['extra_info'])

    def test_sync_after_creation_changes_no_identity(self):
        before = self.real_host(world_devices()).discover(host_doubles.DEFAULT_SETTINGS)
        first_free = seq(GPU1, 'nvidia-222', 0)[0]
        # The mdev of the first creatable slot now exists and the parent
        # can create one less (libvirt's test driver cannot create mdevs,
        # so the "after" host is a second file).
        after = self.real_host(
            world_devices(gpu1_available=1, extra_mdevs=[first_free]),
            name='after.xml').discover(host_doubles.DEFAULT_SETTINGS)
        self.assertEqual([r['address'] for r in before],
                         [r['address'] for r in after
                          if r['address'] != first_free])
        # The slots still to create keep their identities: the ones the
        # tracker would make before are the created one and the rest.
        self.assertEqual(*_new_slots(before, after, GPU1))
        now = {r['address']: r for r in after}[first_free]
        self.assertEqual('true', now['extra_info']['mdev_exists'])
        self.assertEqual(X.mdev_name(first_free, 'pci_0000_84_00_0'),
                         now['dev_id'])

    def test_list_mdevs(self):
        host = self.real_host(world_devices())
        self.assertEqual({
            A: host_mod.MdevLocation(GPU1, 'nvidia-222'),
            B: host_mod.MdevLocation(GPU1, 'nvidia-222'),
            C: host_mod.MdevLocation(GPU2, 'nvidia-223'),
        }, host.list_mdevs())

    def test_top_level_mdev_types(self):
        # libvirt 9.0's test driver refuses a device whose top-level
        # capability is mdev_types (virtual parents such as mtty); newer
        # libvirt accepts it. Either way nothing half-works.
        try:
            host = self.real_host(world_devices() + MTTY_DEVICES)
        except exception.HypervisorError as exc:
            self.assertIn('capability type', str(exc))
            self.assertIn('mtty_mtty', str(exc))
            return
        self.assertEqual(expected_world(with_mtty=True),
                         summary(host.discover(host_doubles.DEFAULT_SETTINGS)))

    def test_default_host(self):
        host = host_mod.connect('test:///default')
        self.addCleanup(host.connection.close)
        self.assertEqual([], host.discover(host_doubles.DEFAULT_SETTINGS))
        topology = host.numa_topology()
        self.assertEqual((0, 1), topology.ids)
        self.assertEqual((0, 1), tuple(topology.socket_of(i)
                                       for i in topology.ids))
        self.assertTrue(host.has_min_version(9, 0, 0))
        self.assertFalse(host.has_min_version(99))
        self.assertTrue(host.hostname)

    def test_custom_host_topology_and_sidecar(self):
        host = self.real_host(world_devices())
        self.assertEqual(numa.HostTopology(), host.numa_topology())
        sidecar = os.path.join(self.tmp, 'topology.json')
        with open(sidecar, 'w') as handle:
            json.dump({'cells': [{'id': 0, 'socket': 0, 'cpus': [0]},
                                 {'id': 1, 'socket': 1, 'cpus': [1]}]},
                      handle)
        self.assertEqual((0, 1), host.numa_topology(sidecar=sidecar).ids)

    def test_connect_error_names_uri(self):
        path = os.path.join(self.tmp, 'garbage.xml')
        with open(path, 'w') as handle:
            handle.write('not XML')
        exc = self.assertRaises(exception.HypervisorError,
                                host_mod.connect, 'test://' + path)
        self.assertIn('test://' + path, str(exc))


class DoubleDiscoveryTest(_Base):

    def test_world_with_mtty(self):
        conn = self.double(world_devices() + MTTY_DEVICES)
        records = double_host(conn, nodename=NODE).discover(
            host_doubles.DEFAULT_SETTINGS)
        self.assertEqual(expected_world(with_mtty=True), summary(records))
        mtty = {r['address']: r for r in records}['mtty']
        self.assertEqual('mtty_mtty', mtty['dev_id'])
        self.assertEqual('label__', mtty['label'])
        self.assertEqual('true', mtty['extra_info']['virtual'])

    def test_virtual_parent_needs_the_mdev_types_flag(self):
        # The double lists mtty only under MDEV_TYPES, as libvirt does.
        conn = self.double(MTTY_DEVICES)
        addresses = {r['address'] for r in double_host(
            conn, nodename=NODE).discover(host_doubles.DEFAULT_SETTINGS)}
        self.assertIn('mtty', addresses)
        self.assertEqual({D: host_mod.MdevLocation('mtty', 'mtty-1')},
                         double_host(conn).list_mdevs())

    def test_creating_mtty_slot_keeps_the_set(self):
        before = self.double(MTTY_DEVICES)
        first_free = seq('mtty', 'mtty-1', 0)[0]
        after = self.double([
            ('mtty_mtty', X.virtual_parent(
                'mtty_mtty', 'mtty', [('mtty-1', 'Single port serial', 1)]),
             ('mdev_types',)),
            MTTY_DEVICES[1],
            (X.mdev_name(first_free, 'mtty_mtty'),
             X.mdev(first_free, 'mtty_mtty', 'mtty-1'), ('mdev',))])
        found = [double_host(c, nodename=NODE).discover(host_doubles.DEFAULT_SETTINGS)
                 for c in (before, after)]
        self.assertEqual(*_new_slots(found[0], found[1], 'mtty'))

    def test_defined_but_stopped_mdev(self):
        # B is defined (persistent) but stopped: it keeps its slot, is not
        # "existing", and will take one of GPU1's two available instances
        # when started, so only one more slot is creatable.
        def gpu1(available, b_active):
            conn = self.double([])
            conn.add('pci_0000_84_00_0', gpu1_xml(available), 'pci',
                     'mdev_types')
            conn.add('mdev_a', X.mdev(A, 'pci_0000_84_00_0', 'nvidia-222'),
                     'mdev', active=True)
            conn.add('mdev_b', X.mdev(B, 'pci_0000_84_00_0', 'nvidia-222'),
                     'mdev', active=b_active)
            return double_host(conn, nodename=NODE)

        stopped = gpu1(available=2, b_active=False)
        found = stopped.discover(host_doubles.DEFAULT_SETTINGS)
        rows = [(r['address'], r['dev_id'], r['extra_info']['mdev_exists'])
                for r in found[1:]]
        self.assertEqual([(A, X.mdev_name(A, 'pci_0000_84_00_0'), 'true'),
                          (B, X.mdev_name(B, 'pci_0000_84_00_0'), 'false')],
                         rows)
        self.assertEqual('1', found[0]['extra_info']['creatable'])
        self.assertEqual({A}, set(stopped.list_mdevs()))
        started = gpu1(available=1, b_active=True)
        self.assertEqual(
            [r['address'] for r in stopped.discover(host_doubles.DEFAULT_SETTINGS)],
            [r['address'] for r in started.discover(host_doubles.DEFAULT_SETTINGS)])

    def test_nodename_defaults_to_hostname(self):
        conn = self.double(world_devices(), hostname='other-host')
        host = double_host(conn)
        self.assertEqual('other-host', host.hostname)
        found = {r['address']: r for r in host.discover(host_doubles.DEFAULT_SETTINGS)}
        new = records_mod.SlotFactory(host.hostname).records(
            _device(found[GPU1]), set(found), 2)
        self.assertEqual(seq(GPU1, 'nvidia-222', 0, 1, node='other-host'),
                         [r['address'] for r in new])

    def test_exposure_table(self):
        table = [
            # (case, settings, GPU2 type, GPU2 slot rows, extra_info)
            ('explicit mapping to the other type, custom class',
             host_doubles.StubSettings(host_doubles.Options('nvidia-222'),
                                       host_doubles.Options('nvidia-223', device_addresses=(GPU2,),
                                                            mdev_class='mlx5',
                                                            resource_class='CUSTOM_MLX5')),
             'nvidia-223',
             [(C, 'nvidia-223', 'true', 'true')],
             {'resource_class': 'CUSTOM_MLX5'}),
            ('cap of 2 on three creatable',
             host_doubles.StubSettings(host_doubles.Options('nvidia-222', max_instances=2)),
             'nvidia-222',
             [(C, 'nvidia-223', 'true', 'false')],
             {'resource_class': 'VGPU', 'creatable': '2'}),
            ('no enabled type',
             host_doubles.StubSettings(),
             None,
             [(C, 'nvidia-223', 'true', 'false')],
             {}),
            ('exposed type the parent does not list',
             host_doubles.StubSettings(host_doubles.Options('nvidia-999', device_addresses=(GPU2,))),
             'nvidia-999',
             [(C, 'nvidia-223', 'true', 'false')],
             {'resource_class': 'VGPU'}),
        ]
        conn = self.double(world_devices())
        for case, settings, gpu_type, rows, extra in table:
            records = double_host(conn, nodename=NODE).discover(settings)
            parent = [r for r in records if r['address'] == GPU2][0]
            self.assertEqual(gpu_type, parent['mdev_type'], case)
            self.assertEqual(
                dict(extra, supported_mdev_types='nvidia-222,nvidia-223'),
                parent['extra_info'], case)
            children = [(r['address'], r['mdev_type'],
                         r['extra_info']['mdev_exists'],
                         r['extra_info']['mdev_exposed'])
                        for r in records if r['parent_addr'] == GPU2]
            self.assertEqual(rows, children, case)

    def test_mdev_with_unknown_parent(self):
        devices = world_devices() + [
            ('mdev_orphan', X.mdev(ORPHAN, 'pci_0000_99_00_0', 'nvidia-222'),
             ('mdev',))]
        host = double_host(self.double(devices), nodename=NODE)
        self.assertNotIn(ORPHAN, {r['address'] for r in host.discover(
            host_doubles.DEFAULT_SETTINGS)})
        self.assertEqual(host_mod.MdevLocation('0000:99:00.0', 'nvidia-222'),
                         host.list_mdevs()[ORPHAN])

    def test_mdevctl_parent_addr_resolves_parent(self):
        xml = ("<device><name>mdev_%s</name><parent>somewhere</parent>"
               "<capability type='mdev'><type id='nvidia-222'/>"
               "<parent_addr>0000:84:00.0</parent_addr></capability>"
               "</device>" % ORPHAN.replace('-', '_'))
        devices = world_devices() + [('mdev_x', xml, ('mdev',))]
        records = double_host(self.double(devices), nodename=NODE).discover(
            host_doubles.DEFAULT_SETTINGS)
        slot = {r['address']: r for r in records}[ORPHAN]
        self.assertEqual((GPU1, 'true'), (slot['parent_addr'],
                                          slot['extra_info']['mdev_exists']))

    def test_ignores_other_device_kinds(self):
        conn = self.double([('computer', X.COMPUTER, ('system',))])
        self.assertEqual([], double_host(conn, nodename=NODE).discover(
            host_doubles.DEFAULT_SETTINGS))

    def test_duplicate_address_is_left_out(self):
        # Which of two devices claiming one address is right cannot be
        # told: both are left out and reported, the rest of the host works.
        devices = world_devices() + [
            ('pci_dup', X.pci('0000:81:00.0', name='pci_dup'), ('pci',))]
        host = double_host(self.double(devices), nodename=NODE)
        records = host.discover(host_doubles.DEFAULT_SETTINGS)
        self.assertNotIn('0000:81:00.0', {r['address'] for r in records})
        self.assertIn(GPU1, {r['address'] for r in records})
        self.assertEqual(
            ['pci_0000_81_00_0', 'pci_dup'],
            sorted(p.kwargs['device'] for p in host.left_out))
        for problem in host.left_out:
            self.assertIsInstance(problem, exception.NodeDeviceLeftOut)
            self.assertIn('address 0000:81:00.0 is also that of node '
                          'device', str(problem))

    def test_numa_topology(self):
        caps_xml = ("<capabilities><host><topology><cells num='1'>"
                    "<cell id='0'><cpus num='1'><cpu id='0' socket_id='0'/>"
                    "</cpus></cell></cells></topology></host></capabilities>")
        sidecar = os.path.join(self.tmp, 'topology.json')
        with open(sidecar, 'w') as handle:
            json.dump({'cells': [{'id': 5}]}, handle)
        table = [(caps_xml, None, (0,)), (caps_xml, sidecar, (0,)),
                 ('<capabilities/>', sidecar, (5,)),
                 ('<capabilities/>', None, ())]
        for xml, path, ids in table:
            host = double_host(host_doubles.DoubleConnection(caps_xml=xml))
            self.assertEqual(ids, host.numa_topology(sidecar=path).ids,
                             (xml, path))

    def test_build_records_is_pure(self):
        parsed = [nodedev.parse_node_device(xml, name)
                  for name, xml, _ in world_devices() + MTTY_DEVICES]
        self.assertEqual(
            expected_world(with_mtty=True),
            summary(records_mod.build_records(NODE, parsed + [None],
                                              host_doubles.DEFAULT_SETTINGS)))


class ErrorTest(_Base):

    def test_device_error_is_wrapped_once_naming_the_device(self):
        conn = self.double(world_devices())
        cause = host_doubles.DoubleError('device vanished', 'NO_NODE_DEVICE')
        conn.add('pci_0000_aa_00_0', '', 'pci', error=cause)
        exc = self.assertRaises(
            exception.HypervisorError,
            double_host(conn, nodename=NODE).discover, host_doubles.DEFAULT_SETTINGS)
        self.assertIn('pci_0000_aa_00_0', str(exc))
        self.assertIn('device vanished', str(exc))
        self.assertEqual(fakelibvirt.VIR_ERR_NO_NODE_DEVICE, exc.kwargs['code'])
        self.assertIs(cause, exc.__cause__)

    def test_real_libvirt_error_on_listing(self):
        conn = self.double(world_devices())
        conn.list_error = libvirt.libvirtError('connection is closed')
        exc = self.assertRaises(exception.HypervisorError,
                                host_mod.Host(conn).list_mdevs)  # real seam
        self.assertIn('connection', str(exc))
        self.assertIsInstance(exc.__cause__, libvirt.libvirtError)

    def test_capabilities_error(self):
        conn = host_doubles.DoubleConnection(caps_xml=host_doubles.DoubleError('nope', 'INTERNAL'))
        exc = self.assertRaises(exception.HypervisorError,
                                double_host(conn).numa_topology)
        self.assertIn('host capabilities', str(exc))

    def test_other_errors_pass_unchanged(self):
        conn = self.double(world_devices())
        conn.add('pci_bug', '', 'pci', error=KeyError('bug'))
        self.assertRaises(KeyError, double_host(conn, nodename=NODE)
                          .discover, host_doubles.DEFAULT_SETTINGS)

    def test_bad_xml_device_is_left_out_not_a_hypervisor_error(self):
        conn = self.double(world_devices())
        conn.add('pci_0000_aa_00_0', '<device>', 'pci')
        host = double_host(conn, nodename=NODE)
        records = host.discover(host_doubles.DEFAULT_SETTINGS)
        self.assertEqual(summary(records), summary(double_host(
            self.double(world_devices()), nodename=NODE).discover(
                host_doubles.DEFAULT_SETTINGS)))
        (problem,) = host.left_out
        self.assertEqual('warning', problem.severity)
        self.assertIn('Node device pci_0000_aa_00_0 left out: malformed XML',
                      str(problem))

    def test_no_connection(self):
        self.assertRaises(exception.InvalidValue, host_mod.Host, None)

    def test_live_connection_reopens_a_dead_one(self):
        class Conn(host_doubles.DoubleConnection):
            alive = 1
            closed = False

            def isAlive(self):  # noqa: N802
                if isinstance(self.alive, Exception):
                    raise self.alive
                return self.alive

            def close(self):
                self.closed = True

        opened = []

        def reopen():
            opened.append(Conn())
            return opened[-1]

        first = Conn()
        host = double_host(first, nodename=NODE, reconnect=reopen)
        self.assertIs(first, host.live_connection())
        first.alive = 0
        second = host.live_connection()
        self.assertEqual([second], opened)
        self.assertTrue(first.closed)
        self.assertIs(second, host.connection)
        second.alive = host_doubles.DoubleError('client socket is closed', 'SYSTEM')
        self.assertIsNot(second, host.live_connection())
        # Without reconnect the connection is returned as it is.
        first.alive = 0
        self.assertIs(first, double_host(first).live_connection())
