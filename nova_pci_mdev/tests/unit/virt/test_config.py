"""Config objects: round trips, exact XML, parse errors, and real libvirt.

The guest XML is checked by the real libvirt library: its test driver
defines it with ``VIR_DOMAIN_DEFINE_VALIDATE`` (schema validation plus
libvirt's own parser), and refuses the broken variants.
"""

import uuid as uuid_lib
from xml.etree import ElementTree

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.virt.libvirt import config

try:
    import libvirt
except ImportError:  # pragma: no cover
    libvirt = None

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'


def mdev_hostdev(**kw):
    return config.LibvirtConfigGuestHostdevMDEV(uuid=U1, **kw)


def guest(*devices, virt_type='test', **kw):
    return config.LibvirtConfigGuest(
        name='guest-%s' % uuid_lib.uuid4().hex[:8], uuid=str(uuid_lib.uuid4()),
        virt_type=virt_type, devices=list(devices), **kw)


class RoundTripTest(testtools.TestCase):

    OBJECTS = [
        mdev_hostdev(),
        mdev_hostdev(display=True, ramfb=False),
        mdev_hostdev(model=None),
        config.LibvirtConfigGuestHostdevPCI('0000:84:00.0'),
        config.LibvirtConfigGuestHostdevPCI('ffff:ff:1f.7', managed=False),
        config.LibvirtConfigNodeDeviceMdev('pci_0000_84_00_0', 'nvidia-35'),
        config.LibvirtConfigNodeDeviceMdev(
            'mtty', 'mtty-1', uuid=U2, name='mdev_x_mtty', iommu_group=12,
            attrs=(('enable_uvm', '1'),)),
        config.LibvirtConfigGuest(name='g', uuid=U2),
        config.LibvirtConfigGuest(
            name='g', memory_kb=2048, vcpus=4, virt_type='kvm',
            devices=[mdev_hostdev(),
                     config.LibvirtConfigGuestHostdevPCI('0000:af:02.1'),
                     config.LibvirtConfigGuestRawDevice(
                         "<memballoon model='none'>\n <x/></memballoon>")]),
    ]

    def test_format_then_parse_gives_an_equal_object(self):
        for obj in self.OBJECTS:
            for pretty in (True, False):
                text = obj.to_xml(pretty=pretty)
                self.assertEqual(obj, type(obj).parse_str(text), text)


class FormatTest(testtools.TestCase):

    def test_mdev_hostdev(self):
        el = ElementTree.fromstring(mdev_hostdev(display=True).to_xml())
        self.assertEqual({'mode': 'subsystem', 'type': 'mdev',
                          'model': 'vfio-pci', 'display': 'on'}, el.attrib)
        self.assertEqual({'uuid': U1}, el.find('source/address').attrib)

    def test_pci_hostdev(self):
        el = ElementTree.fromstring(
            config.LibvirtConfigGuestHostdevPCI('0000:84:00.0').to_xml())
        self.assertEqual({'mode': 'subsystem', 'type': 'pci',
                          'managed': 'yes'}, el.attrib)
        self.assertEqual({'domain': '0x0000', 'bus': '0x84', 'slot': '0x00',
                          'function': '0x0'},
                         el.find('source/address').attrib)

    def test_pci_hostdev_needs_a_pci_address(self):
        for bad in ('mtty', U1, '0000:84:00', None):
            e = self.assertRaises(
                exception.InvalidPciAddress,
                config.LibvirtConfigGuestHostdevPCI(bad).to_xml)
            self.assertIn(repr(bad), str(e))

    def test_mdev_node_device(self):
        el = ElementTree.fromstring(config.LibvirtConfigNodeDeviceMdev(
            'pci_0000_84_00_0', 'nvidia-35', uuid=U1).to_xml())
        self.assertEqual(('pci_0000_84_00_0', 'nvidia-35', U1, None), (
            el.findtext('parent'),
            el.find("capability[@type='mdev']/type").get('id'),
            el.findtext('capability/uuid'), el.find('name')))

    def test_guest_hostdevs_property_skips_other_devices(self):
        pci = config.LibvirtConfigGuestHostdevPCI('0000:84:00.0')
        raw = config.LibvirtConfigGuestRawDevice('<watchdog model="ib700"/>')
        self.assertEqual([mdev_hostdev(), pci],
                         guest(raw, mdev_hostdev(), pci).hostdevs)


class ParseErrorTest(testtools.TestCase):

    CASES = [
        (config.LibvirtConfigGuestHostdevMDEV,
         "<disk type='file'/>", 'got <disk>'),
        (config.LibvirtConfigGuestHostdevMDEV,
         "<hostdev mode='subsystem' type='pci'/>", "type='pci'"),
        (config.LibvirtConfigGuestHostdevMDEV,
         "<hostdev mode='subsystem' type='mdev'><source/></hostdev>",
         'uuid'),
        (config.LibvirtConfigGuestHostdevMDEV,
         "<hostdev mode='subsystem' type='mdev' display='yes'><source>"
         "<address uuid='%s'/></source></hostdev>" % U1, "display='yes'"),
        (config.LibvirtConfigGuestHostdevPCI,
         "<hostdev mode='subsystem' type='pci'><source><address "
         "domain='0' bus='0x100' slot='0' function='0'/></source></hostdev>",
         "bus='0x100'"),
        (config.LibvirtConfigGuestHostdevPCI,
         "<hostdev mode='subsystem' type='pci'><source><address "
         "domain='0' bus='zz' slot='0' function='0'/></source></hostdev>",
         "bus 'zz'"),
        (config.LibvirtConfigGuestHostdevPCI,
         "<hostdev mode='subsystem' type='pci'/>", '<source><address/>'),
        (config.LibvirtConfigGuest, '<domain><uuid>x</uuid></domain>',
         'missing <name>'),
        (config.LibvirtConfigGuest,
         "<domain><name>g</name><memory unit='furlong'>1</memory></domain>",
         "unit 'furlong'"),
        (config.LibvirtConfigGuest, '<domain><name>g</name><vcpu>two</vcpu>'
         '</domain>', "vcpu 'two'"),
        (config.LibvirtConfigNodeDeviceMdev,
         '<device><parent>p</parent></device>', "capability type='mdev'"),
        (config.LibvirtConfigNodeDeviceMdev,
         "<device><capability type='mdev'><type id='t'/></capability>"
         "</device>", 'missing <parent>'),
        (config.LibvirtConfigNodeDeviceMdev,
         "<device><parent>p</parent><capability type='mdev'/></device>",
         '<type id=.../>'),
        (config.LibvirtConfigGuest, '<domain><name>g</name>',
         'malformed XML'),
        (config.LibvirtConfigGuest,
         '<!DOCTYPE d [<!ENTITY e "x">]><domain><name>&e;</name></domain>',
         'DOCTYPE'),
        (config.LibvirtConfigGuest, '', 'empty XML'),
    ]

    def test_errors_name_the_element_and_the_fault(self):
        for cls, text, fragment in self.CASES:
            e = self.assertRaises(exception.LibvirtXmlError, cls.parse_str,
                                  text)
            self.assertIn(fragment, str(e), text)
            self.assertIn('<%s>' % e.kwargs['element'], str(e))

    def test_memory_units_and_defaults(self):
        cases = [("<memory unit='MiB'>2</memory>", 2048),
                 ("<memory unit='GiB'>1</memory>", 1024 ** 2),
                 ('<memory>512</memory>', 512),
                 ('', config.LibvirtConfigGuest.memory_kb)]
        for memory, kib in cases:
            obj = config.LibvirtConfigGuest.parse_str(
                '<domain type="kvm"><name>g</name>%s</domain>' % memory)
            self.assertEqual((kib, 1, 'hvm', [], None),
                             (obj.memory_kb, obj.vcpus, obj.os_type,
                              obj.devices, obj.uuid))


class RealLibvirtTest(testtools.TestCase):
    """Guest XML against libvirt's own parser and RNG schema."""

    def setUp(self):
        super().setUp()
        if libvirt is None:
            self.skipTest('libvirt-python is not installed')
        libvirt.registerErrorHandler(lambda *a: None, None)
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)

    def _define(self, obj):
        dom = self.conn.defineXMLFlags(obj.to_xml(),
                                       libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        self.addCleanup(dom.undefine)
        return config.LibvirtConfigGuest.parse_str(dom.XMLDesc(0))

    def test_valid_hostdevs_are_accepted_and_read_back(self):
        cases = [
            [mdev_hostdev()],
            [mdev_hostdev(display=True, ramfb=True)],
            [config.LibvirtConfigGuestHostdevPCI('0000:84:00.0')],
            [mdev_hostdev(), config.LibvirtConfigGuestHostdevPCI(
                '0000:af:02.3'), config.LibvirtConfigGuestHostdevMDEV(U2)],
        ]
        for devices in cases:
            obj = guest(*devices)
            back = self._define(obj)
            self.assertEqual((obj.name, obj.uuid, devices),
                             (back.name, back.uuid, back.hostdevs))

    def test_broken_hostdevs_are_refused(self):
        cases = [mdev_hostdev(model=None),
                 config.LibvirtConfigGuestHostdevMDEV('not-a-uuid'),
                 config.LibvirtConfigGuestHostdevMDEV(U1[:-1])]
        for device in cases:
            obj = guest(device)
            e = self.assertRaises(libvirt.libvirtError,
                                  self.conn.defineXMLFlags, obj.to_xml(),
                                  libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
            self.assertIn('validate', str(e))

    def test_mdev_node_device_xml_passes_libvirts_parser(self):
        """The test driver cannot create mdevs, but parses the XML first:
        a good document fails later (not an mdev capable driver), a bad
        UUID fails in the parser."""
        good = config.LibvirtConfigNodeDeviceMdev(
            'pci_0000_84_00_0', 'nvidia-35', uuid=U1).to_xml()
        bad = config.LibvirtConfigNodeDeviceMdev(
            'pci_0000_84_00_0', 'nvidia-35', uuid='zzz').to_xml()
        e_good = self.assertRaises(libvirt.libvirtError,
                                   self.conn.nodeDeviceCreateXML, good, 0)
        e_bad = self.assertRaises(libvirt.libvirtError,
                                  self.conn.nodeDeviceCreateXML, bad, 0)
        self.assertNotIn('uuid', str(e_good).lower())
        self.assertIn('uuid', str(e_bad).lower())

    def test_fake_libvirt_creates_from_the_same_xml(self):
        host = fake.FakeHost().add_mdev_parent('0000:84:00.0',
                                               types={'nvidia-35': 2})
        conn = host.connect()
        dev = conn.nodeDeviceCreateXML(config.LibvirtConfigNodeDeviceMdev(
            'pci_0000_84_00_0', 'nvidia-35', uuid=U1).to_xml(), 0)
        parsed = config.LibvirtConfigNodeDeviceMdev.parse_str(dev.XMLDesc(0))
        self.assertEqual(('pci_0000_84_00_0', 'nvidia-35', U1, dev.name()),
                         (parsed.parent, parsed.mdev_type, parsed.uuid,
                          parsed.name))
        self.assertEqual(1, host.available_instances('0000:84:00.0',
                                                     'nvidia-35'))
