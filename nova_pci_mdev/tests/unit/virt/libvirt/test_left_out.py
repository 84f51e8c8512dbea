"""Nothing libvirt lists is dropped without a word (issue 31, item 2).

:func:`records.build_records` on parsed node devices: every node device
that gives no record is reported once in ``left_out`` (NodeDeviceLeftOut
naming it and why), stand-ins of held slots excepted; counts beyond what
the objects hold are capped with a NodeDeviceValueCapped, never wrapped or
zeroed, and a NUMA node beyond it refuses the device. The world::

    pci_0000_84_00_0  GPU, nvidia-222 x4             (GPU)
    pci_0000_af_00_0  NIC, no mdev types             (NIC)
    ap_matrix         s390 AP matrix, vfio_ap-passthrough
    mdevs under: the GPU (kept), the NIC, ap_matrix, a parent libvirt does
    not list, "computer", a parent whose XML is broken, no parent at all
"""

import fixtures
import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import host_doubles
from nova_pci_mdev.tests.fixtures import libvirt_data
from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import records
from nova_pci_mdev.virt.libvirt.emulated import host as emulated
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev

SETTINGS = host_doubles.DEFAULT_SETTINGS
GPU, NIC = '0000:84:00.0', '0000:af:00.0'
KEPT = '11111111-0000-4000-8000-000000000001'
AP_MATRIX = """
  <device>
    <name>ap_matrix</name>
    <path>/sys/devices/vfio_ap/matrix</path>
    <parent>computer</parent>
    <capability type='ap_matrix'>
      <capability type='mdev_types'>
        <type id='vfio_ap-passthrough'>
          <name>VFIO AP Passthrough Device</name>
          <deviceAPI>vfio-ap</deviceAPI>
          <availableInstances>65536</availableInstances>
        </type>
      </capability>
    </capability>
  </device>"""
BROKEN_PARENT = ("<device><name>pci_0000_86_00_0</name><capability "
                 "type='pci'><domain>0</domain></capability></device>")
NO_PARENT = """
  <device>
    <name>mdev_%s</name>
    <capability type='mdev'><type id='nvidia-222'/></capability>
  </device>"""
#: (uuid, parent node name, type, what the warning says)
ORPHANS = (
    ('22222222-0000-4000-8000-000000000002', X.node_name(NIC), 'nvidia-222',
     'its parent pci_0000_af_00_0 (0000:af:00.0) has no mdev types'),
    ('33333333-0000-4000-8000-000000000003', 'ap_matrix',
     'vfio_ap-passthrough', 'its parent ap_matrix is left out too'),
    ('44444444-0000-4000-8000-000000000004', 'pci_0000_99_00_0',
     'nvidia-222', 'its parent pci_0000_99_00_0 is not listed by libvirt '
     'as a PCI function or an mdev parent'),
    ('55555555-0000-4000-8000-000000000005', 'computer', 'mtty-1',
     'its parent computer is not listed by libvirt'),
    ('66666666-0000-4000-8000-000000000006', 'pci_0000_86_00_0',
     'nvidia-222', 'its parent pci_0000_86_00_0 is left out too'),
)
ORPHAN_NO_PARENT = '77777777-0000-4000-8000-000000000007'


def _listing():
    devices = [X.gpu(GPU, [('nvidia-222', 'GRID', 4)]), X.pci(NIC),
               AP_MATRIX, BROKEN_PARENT, X.mdev(KEPT, X.node_name(GPU),
                                                'nvidia-222'),
               NO_PARENT % ORPHAN_NO_PARENT.replace('-', '_')]
    devices += [X.mdev(uuid, parent, kind) for uuid, parent, kind, _why
                in ORPHANS]
    return [(None, xml, None) for xml in devices]


def _discover(listing, held=()):
    host = host_mod.Host(host_doubles.DoubleConnection(), nodename='cn1')
    recs = host.discover(SETTINGS, held=held, source=tuple(listing))
    return recs, host.left_out


class LeftOutTest(testtools.TestCase):

    def test_every_device_without_a_record_is_named_once(self):
        recs, left_out = _discover(_listing())
        self.assertEqual({GPU, NIC, KEPT}, {r['address'] for r in recs})
        by_device = {}
        for problem in left_out:
            self.assertIsInstance(problem, exception.NodeDeviceLeftOut)
            self.assertNotIn(problem.kwargs['device'], by_device)
            by_device[problem.kwargs['device']] = problem
        expected = {'pci_0000_86_00_0', 'ap_matrix',
                    'mdev_' + ORPHAN_NO_PARENT.replace('-', '_')}
        expected.update(X.mdev_name(uuid, parent)
                        for uuid, parent, _kind, _why in ORPHANS)
        self.assertEqual(sorted(expected), sorted(by_device))
        for uuid, parent, kind, why in ORPHANS:
            problem = by_device[X.mdev_name(uuid, parent)]
            self.assertIn('mdev %s of type %s, which a guest may be using, '
                          'is not tracked: %s' % (uuid, kind, why),
                          str(problem))
            self.assertEqual((uuid, 'mdev-vf', kind), (
                problem.kwargs['address'], problem.kwargs['dev_type'],
                problem.kwargs['mdev_type']))
        self.assertIn('it names no parent', str(by_device[
            'mdev_' + ORPHAN_NO_PARENT.replace('-', '_')]))
        matrix = by_device['ap_matrix']
        self.assertIn('an mdev parent of kind ap_matrix offering mdev '
                      'type(s) vfio_ap-passthrough', str(matrix))
        self.assertEqual(('matrix', 'vfio_ap-passthrough'), (
            matrix.kwargs['address'], matrix.kwargs['mdev_types']))

    def test_stand_ins_of_held_slots_are_not_reported(self):
        # A held slot whose mdev and parent both vanished: libvirt lists
        # neither, so there is no node device to name.
        gone = '88888888-0000-4000-8000-000000000008'
        _recs, left_out = _discover(
            [(None, X.gpu(GPU, [('nvidia-222', 'GRID', 4)]), None)],
            held=[(gone, '0000:99:00.0', 'nvidia-222')])
        self.assertEqual([], left_out)

    def test_build_records_reports_in_a_given_list_only(self):
        parsed = [nodedev.parse_node_device(xml)
                  for _name, xml, _active in _listing()[-2:]]
        left_out = []
        self.assertEqual([], records.build_records('cn1', parsed, SETTINGS,
                                                   left_out=left_out))
        self.assertEqual(2, len(left_out))
        self.assertEqual([], records.build_records('cn1', parsed, SETTINGS))


class CountTest(testtools.TestCase):
    """Counts beyond nodedev.MAX_COUNT (2**31 - 1): capped or refused."""

    def test_available_instances_are_capped_with_a_warning(self):
        for reported in (2 ** 31, 2 ** 63, 2 ** 64, 10 ** 40):
            recs, left_out = _discover([(None, X.gpu(
                GPU, [('nvidia-222', 'GRID', reported)]), None)])
            (parent,) = recs
            self.assertEqual(str(nodedev.MAX_COUNT),
                             parent['extra_info']['creatable'], reported)
            (warning,) = left_out
            self.assertIsInstance(warning, exception.NodeDeviceValueCapped)
            self.assertEqual('warning', warning.severity)
            self.assertEqual(
                'Node device pci_0000_84_00_0: availableInstances of '
                'nvidia-222 %d is more than 2147483647, the most a count of '
                "Nova's objects and Placement's inventories holds; "
                '2147483647 is used' % reported, str(warning))
        recs, left_out = _discover([(None, X.gpu(
            GPU, [('nvidia-222', 'GRID', nodedev.MAX_COUNT)]), None)])
        self.assertEqual(([], str(nodedev.MAX_COUNT)), (
            left_out, recs[0]['extra_info']['creatable']))

    def test_numa_node_beyond_the_objects_refuses_the_device(self):
        for node in (2 ** 31, 2 ** 64):
            exc = self.assertRaises(
                exception.NodeDeviceXMLInvalid, nodedev.parse_node_device,
                X.pci(NIC, numa=node))
            self.assertIn('numa node %r is out of range 0..2147483647'
                          % str(node), str(exc))
        self.assertEqual(nodedev.MAX_COUNT, nodedev.parse_node_device(
            X.pci(NIC, numa=nodedev.MAX_COUNT)).numa_node)

    def test_integers_are_ascii_digits(self):
        for value in ('\u00b2', '\u0663', '1_0', '\uff11', '0x', '+1'):
            xml = X.gpu(GPU, [('nvidia-222', 'GRID', 1)]).replace(
                '<availableInstances>1<', '<availableInstances>%s<' % value)
            exc = self.assertRaises(exception.NodeDeviceXMLInvalid,
                                    nodedev.parse_node_device, xml)
            self.assertIn('availableInstances of nvidia-222', str(exc))
        xml = X.gpu(GPU, [('nvidia-222', 'GRID', 1)]).replace(
            '<availableInstances>1<', '<availableInstances>0x10<')
        (kind,) = nodedev.parse_node_device(xml).mdev_types
        self.assertEqual(16, kind.available_instances)


class EmulatedHostTest(testtools.TestCase):
    """A ``test://`` host: its file's orphan mdevs are never seeded into
    the emulated backend; they pass as the file has them, for discovery to
    name, also when an older version seeded them (mdevs.json kept)."""

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.conn = libvirt.open('test://' + libvirt_data.HOST)
        self.addCleanup(self.conn.close)

    def discover(self):
        host = emulated.EmulatedHost(self.conn, self.state, nodename='cn1')
        recs = host.discover(SETTINGS)
        return host, recs, [p.kwargs['device'] for p in host.left_out]

    def test_orphans_are_named_once_and_not_seeded(self):
        host, recs, named = self.discover()
        self.assertEqual(['0000:02:10.7'], [r['address'] for r in recs])
        self.assertEqual(sorted(libvirt_data.LEFT_OUT),
                         sorted(named))
        self.assertEqual({}, host.backend.list())

    def test_an_older_seed_of_an_orphan_is_not_a_second_device(self):
        orphan = 'd069d019-36ea-4111-8f0a-8c9a70e21366'
        backend = mdev_emulated.EmulatedBackend(self.state, {})
        backend._save({orphan: mdev.mdev_info(orphan, '0000:00:02.0',
                                              'i915-GVTg_V5_8')})
        _host, _recs, named = self.discover()
        self.assertEqual(sorted(libvirt_data.LEFT_OUT),
                         sorted(named))
