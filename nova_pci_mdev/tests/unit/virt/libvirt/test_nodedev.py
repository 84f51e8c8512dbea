"""Node-device XML -> dataclasses, good and bad, table-driven."""

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames

UUID1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
UUID2 = 'c0ffee00-1b54-4048-85b3-a6a62d165c02'

GPU_TYPES = (('nvidia-222', 'GRID T4-1B', 14), ('nvidia-223', None, 8))

T4 = nodedev.PciFunction(
    name='pci_0000_84_00_0', address='0000:84:00.0', vendor_id='10de',
    product_id='1eb8', numa_node=1, parent='computer',
    mdev_types=(
        nodedev.MdevType('nvidia-222', 'GRID T4-1B', 'vfio-pci', 14),
        nodedev.MdevType('nvidia-223', None, 'vfio-pci', 8)),
    vendor_name='Vendor 10de', product_name='Product 1eb8')

GOOD = [
    # (case, xml, expected)
    ('plain PCI, no NUMA node',
     X.pci('0000:00:1f.6'),
     nodedev.PciFunction(
         name='pci_0000_00_1f_6', address='0000:00:1f.6', vendor_id='8086',
         product_id='1528', parent='computer', vendor_name='Vendor 8086',
         product_name='Product 1528')),
    ('NUMA node present',
     X.pci('0000:00:1f.6', numa=3),
     nodedev.PciFunction(
         name='pci_0000_00_1f_6', address='0000:00:1f.6', vendor_id='8086',
         product_id='1528', numa_node=3, parent='computer',
         vendor_name='Vendor 8086', product_name='Product 1528')),
    ('PF with two VFs',
     X.pf('0000:81:00.0', ['0000:81:10.0', '0000:81:10.2'], numa=0),
     nodedev.PciFunction(
         name='pci_0000_81_00_0', address='0000:81:00.0', vendor_id='8086',
         product_id='1528', numa_node=0, parent='computer',
         virt_functions=('0000:81:10.0', '0000:81:10.2'),
         sriov_capable=True, vendor_name='Vendor 8086',
         product_name='Product 1528')),
    ('PF with SR-IOV enabled but no VF yet',
     X.pf('0000:81:00.1', []),
     nodedev.PciFunction(
         name='pci_0000_81_00_1', address='0000:81:00.1', vendor_id='8086',
         product_id='1528', parent='computer', sriov_capable=True,
         vendor_name='Vendor 8086', product_name='Product 1528')),
    ('VF with phys_function',
     X.vf('0000:81:10.2', '0000:81:00.0', vendor='8086', product='1515'),
     nodedev.PciFunction(
         name='pci_0000_81_10_2', address='0000:81:10.2', vendor_id='8086',
         product_id='1515', parent='pci_0000_81_00_0',
         phys_function='0000:81:00.0', vendor_name='Vendor 8086',
         product_name='Product 1515')),
    ('GPU with several mdev types, one without name',
     X.gpu('0000:84:00.0', GPU_TYPES, numa=1), T4),
    ('Intel GVT-g: types without <name>',
     X.gpu('0000:00:02.0', [('i915-GVTg_V5_4', None, 2),
                            ('i915-GVTg_V5_8', None, 1)],
           vendor='8086', product='3e92'),
     nodedev.PciFunction(
         name='pci_0000_00_02_0', address='0000:00:02.0', vendor_id='8086',
         product_id='3e92', parent='computer',
         mdev_types=(
             nodedev.MdevType('i915-GVTg_V5_4', None, 'vfio-pci', 2),
             nodedev.MdevType('i915-GVTg_V5_8', None, 'vfio-pci', 1)),
         vendor_name='Vendor 8086', product_name='Product 3e92')),
    ('mtty, top-level types nested twice (libvirt form)',
     X.virtual_parent('mtty_mtty', 'mtty',
                      [('mtty-1', 'Single port serial', 24),
                       ('mtty-2', 'Dual port serial', 12)]),
     nodedev.VirtualParent(
         name='mtty_mtty', address='mtty', parent='computer',
         mdev_types=(
             nodedev.MdevType('mtty-1', 'Single port serial', 'vfio-pci',
                              24),
             nodedev.MdevType('mtty-2', 'Dual port serial', 'vfio-pci',
                              12)))),
    ('mtty, single-level top-level types, no <path>',
     "<device><name>mtty</name><capability type='mdev_types'>"
     "<type id='mtty-1'><deviceAPI>vfio-pci</deviceAPI>"
     "<availableInstances>4</availableInstances></type>"
     "</capability></device>",
     nodedev.VirtualParent(
         name='mtty', address='mtty',
         mdev_types=(nodedev.MdevType('mtty-1', None, 'vfio-pci', 4),))),
    ('mdev, libvirt >= 7.7 name with parent and <uuid>',
     X.mdev(UUID1, 'pci_0000_84_00_0', 'nvidia-222'),
     nodedev.Mdev(name='mdev_4b20d080_1b54_4048_85b3_a6a62d165c01_0000_84_'
                       '00_0',
                  uuid=UUID1, mdev_type='nvidia-222',
                  parent='pci_0000_84_00_0', iommu_group=20)),
    ('mdev, old name, uuid only in the name',
     X.mdev(UUID2, 'pci_0000_84_00_0', 'nvidia-222', new_name=False,
            with_uuid=False),
     nodedev.Mdev(name='mdev_c0ffee00_1b54_4048_85b3_a6a62d165c02',
                  uuid=UUID2, mdev_type='nvidia-222',
                  parent='pci_0000_84_00_0', iommu_group=20)),
    ('mdev of a virtual parent, new name',
     X.mdev(UUID1, 'mtty_mtty', 'mtty-1', iommu_group=3),
     nodedev.Mdev(name='mdev_4b20d080_1b54_4048_85b3_a6a62d165c01',
                  uuid=UUID1, mdev_type='mtty-1', parent='mtty_mtty',
                  iommu_group=3)),
    ('mdev with upper-case uuid and parent_addr (mdevctl defined)',
     "<device><name>mdev_%s_0000_84_00_0</name>"
     "<parent>pci_0000_84_00_0</parent><capability type='mdev'>"
     "<type id='nvidia-222'/><uuid>%s</uuid>"
     "<parent_addr>0000:84:00.0</parent_addr></capability></device>"
     % (UUID1.replace('-', '_'), UUID1.upper()),
     nodedev.Mdev(name='mdev_%s_0000_84_00_0' % UUID1.replace('-', '_'),
                  uuid=UUID1, mdev_type='nvidia-222',
                  parent='pci_0000_84_00_0', parent_addr='0000:84:00.0')),
    ('hex bus, upper-case ids, numa node -1',
     "<device><name>pci_0000_d8_1f_7</name><capability type='pci'>"
     "<domain>0</domain><bus>0xD8</bus><slot>31</slot><function>7"
     "</function><product id='0x1EB8'/><vendor id='0x10DE'/>"
     "<numa node='-1'/></capability></device>",
     nodedev.PciFunction(
         name='pci_0000_d8_1f_7', address='0000:d8:1f.7', vendor_id='10de',
         product_id='1eb8')),
    ('system device is ignored', '<device><name>computer</name>'
     "<capability type='system'/></device>", None),
    ('net device is ignored', '<device><name>net_eth0</name>'
     "<capability type='net'><interface>eth0</interface></capability>"
     '</device>', None),
    ('character entities are decoded, not a DTD',
     "<device><name>x&amp;y</name><capability type='usb'/></device>", None),
]

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE device [
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
]>
<device><name>&c;</name><capability type='system'/></device>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE device [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<device><name>&secret;</name></device>"""

BAD_PCI = X.pci('0000:84:00.0')

BAD = [
    # (case, xml, words the message must contain)
    ('malformed', '<device><name>pci_x</name>', ['malformed']),
    ('not XML', 'pci_0000_84_00_0', ['malformed']),
    ('empty', '', ['empty']),
    ('entity expansion', BILLION_LAUGHS, ['DOCTYPE', 'refused']),
    ('external entity', EXTERNAL_ENTITY, ['DOCTYPE', 'refused']),
    ('doctype without entities',
     '<!DOCTYPE device><device><name>a</name></device>', ['DOCTYPE']),
    ('undefined entity', '<device><name>&nope;</name></device>',
     ['malformed', 'undefined entity']),
    ('wrong root', '<domain><name>a</name></domain>', ['<domain>']),
    ('missing domain', BAD_PCI.replace('<domain>0</domain>', ''),
     ['missing <domain>']),
    ('bus out of range', BAD_PCI.replace('<bus>132</bus>', '<bus>256</bus>'),
     ['bus', '256', 'range']),
    ('slot out of range', BAD_PCI.replace('<slot>0</slot>',
                                          '<slot>32</slot>'),
     ['slot', '32']),
    ('function not a number',
     BAD_PCI.replace('<function>0</function>', '<function>x</function>'),
     ['function', "'x'", 'not an integer']),
    ('vendor id not hex', BAD_PCI.replace("id='0x8086'", "id='0xzz'"),
     ['vendor', '0xzz']),
    ('product id missing', BAD_PCI.replace("<product id='0x1528'>",
                                           '<product>'),
     ['product', 'None']),
    ('numa node not a number', X.pci('0000:84:00.0', numa=0).replace(
        "node='0'", "node='zero'"), ['numa node', 'zero']),
    ('VF address broken', X.vf('0000:81:10.0', '0000:81:00.0').replace(
        "bus='0x81' slot='0x00'", "bus='0xq1' slot='0x00'"),
     ['address bus', '0xq1']),
    ('mdev type id with path', X.gpu('0000:84:00.0', [('../x', None, 1)]),
     ['mdev type', '../x']),
    ('availableInstances missing', X.gpu('0000:84:00.0', [
        ('nvidia-1', None, 1)]).replace(
        '<availableInstances>1</availableInstances>', ''),
     ['availableInstances']),
    ('availableInstances negative', X.gpu('0000:84:00.0', [
        ('nvidia-1', None, 1)]).replace('>1</avail', '>-1</avail'),
     ['availableInstances of nvidia-1', '-1']),
    ('type listed twice', X.gpu('0000:84:00.0', [
        ('nvidia-1', None, 1), ('nvidia-1', None, 2)]),
     ['nvidia-1', 'twice']),
    ('no types', "<device><name>mtty</name><capability type='mdev_types'/>"
     '</device>', ['no <type>']),
    ('mdev without type', X.mdev(UUID1, 'pci_0000_84_00_0', 'x').replace(
        "<type id='x'/>", ''), ['mdev type', 'None']),
    ('mdev uuid nowhere', "<device><name>mdev_foo</name>"
     "<capability type='mdev'><type id='t'/></capability></device>",
     ['no <uuid>']),
    ('mdev uuid malformed', "<device><name>mdev_foo</name>"
     "<capability type='mdev'><type id='t'/><uuid>1234</uuid></capability>"
     '</device>', ['1234']),
    ('mdev uuid differs from name',
     X.mdev(UUID1, 'pci_0000_84_00_0', 't').replace(
         '<uuid>%s</uuid>' % UUID1, '<uuid>%s</uuid>' % UUID2),
     ['does not match']),
    ('virtual parent path unusable',
     X.virtual_parent('mtty_mtty', 'mt ty', [('mtty-1', None, 1)]),
     ['virtual parent', 'mt ty']),
]


class ParseGoodTest(testtools.TestCase):

    def test_table(self):
        for case, xml, expected in GOOD:
            self.assertEqual(expected, nodedev.parse_node_device(xml),
                             case)

    def test_bytes_input(self):
        xml = X.gpu('0000:84:00.0', GPU_TYPES, numa=1).encode('utf-8')
        self.assertEqual(T4, nodedev.parse_node_device(xml))

    def test_kind_properties(self):
        pf = nodedev.parse_node_device(X.pf('0000:81:00.0', []))
        vf = nodedev.parse_node_device(X.vf('0000:81:10.0', '0000:81:00.0'))
        plain = nodedev.parse_node_device(X.pci('0000:00:1f.6'))
        table = [(pf, (True, False, False)), (vf, (False, True, False)),
                 (plain, (False, False, False)), (T4, (False, False, True))]
        for dev, expected in table:
            self.assertEqual(
                expected, (dev.is_pf, dev.is_vf, dev.is_mdev_parent),
                dev.name)

    def test_listed_name_stands_in_for_missing_name(self):
        xml = "<device><capability type='mdev'><type id='t'/></capability>" \
              "</device>"
        dev = nodedev.parse_node_device(
            xml, device_name='mdev_%s' % UUID1.replace('-', '_'))
        self.assertEqual(UUID1, dev.uuid)


class ParseBadTest(testtools.TestCase):

    def test_table(self):
        for case, xml, words in BAD:
            exc = self.assertRaises(
                exception.NodeDeviceXMLInvalid, nodedev.parse_node_device,
                xml, device_name='listed_name')
            for word in words:
                self.assertIn(word, str(exc), case)
            self.assertIsInstance(exc, exception.HostDescriptionInvalid)

    def test_error_names_the_device(self):
        exc = self.assertRaises(
            exception.NodeDeviceXMLInvalid, nodedev.parse_node_device,
            BAD_PCI.replace('<bus>132</bus>', '<bus>x</bus>'),
            device_name='listed_name')
        # The <name> of the XML wins over the listed name once parsed.
        self.assertIn('pci_0000_84_00_0', str(exc))
        exc = self.assertRaises(
            exception.NodeDeviceXMLInvalid, nodedev.parse_node_device,
            '<device>', device_name='pci_0000_84_00_0')
        self.assertIn('pci_0000_84_00_0', str(exc))

    def test_not_a_string(self):
        exc = self.assertRaises(exception.NodeDeviceXMLInvalid,
                                nodedev.parse_node_device, 42, 'dev')
        self.assertIn('int', str(exc))


def _spell(draw, value, width, hex_only):
    """One way to write ``value``: libvirt's padded hex, other paddings and
    cases, or (``hex_only`` False) decimal."""
    kind = draw(st.sampled_from(['libvirt', 'short', 'long', 'upper']
                                + ([] if hex_only else ['decimal'])))
    if kind == 'decimal':
        return str(value)
    if kind == 'short':
        return '0x%x' % value
    if kind == 'long':
        return '0x%0*x' % (width + 1, value) if width < 4 else '0x%04x' % value
    if kind == 'upper':
        return '0x%0*X' % (width, value)
    return '0x%0*x' % (width, value)


PARTS = st.tuples(st.integers(0, 0xffff), st.integers(0, 0xff),
                  st.integers(0, 0x1f), st.integers(0, 7))


class AddressSpellingTest(testtools.TestCase):
    """The fast paths for libvirt's spellings agree with the general
    part-by-part parser on every spelling, valid or out of range."""

    @hypothesis.given(parts=PARTS, data=st.data())
    def test_address_attributes(self, parts, data):
        spelled = [_spell(data.draw, value, width, hex_only=True)
                   for value, width in zip(parts, (4, 2, 2, 1))]
        xml = X.vf('0000:81:10.0', '0000:81:00.0').replace(
            "domain='0x0000' bus='0x81' slot='0x00' function='0x0'",
            "domain='%s' bus='%s' slot='%s' function='%s'" % tuple(spelled))
        found = nodedev.parse_node_device(xml)
        self.assertEqual('%04x:%02x:%02x.%x' % parts, found.phys_function)

    @hypothesis.given(parts=PARTS)
    def test_capability_children(self, parts):
        found = nodedev.parse_node_device(X.pci('0000:00:00.0').replace(
            '<domain>0</domain>', '<domain>%d</domain>' % parts[0]).replace(
            '<bus>0</bus>', '<bus>%d</bus>' % parts[1]).replace(
            '<slot>0</slot>', '<slot>%d</slot>' % parts[2]).replace(
            '<function>0</function>', '<function>%d</function>' % parts[3]))
        self.assertEqual('%04x:%02x:%02x.%x' % parts, found.address)

    def test_out_of_range_in_libvirt_spelling(self):
        for attrs, words in [("slot='0x20'", ['address slot', '0x20']),
                             ("function='0x8'", ['address function']),
                             ("domain='0x10000'", ['address domain'])]:
            key = attrs.split('=')[0]
            xml = X.vf('0000:81:10.0', '0000:81:00.0')
            start = xml.index(key + "='", xml.index('phys_function'))
            end = xml.index("'", start + len(key) + 2) + 1
            xml = xml[:start] + attrs + xml[end:]
            exc = self.assertRaises(exception.NodeDeviceXMLInvalid,
                                    nodedev.parse_node_device, xml)
            for word in words:
                self.assertIn(word, str(exc))

    def test_separators_inside_a_value_are_refused(self):
        xml = X.vf('0000:81:10.0', '0000:81:00.0').replace(
            "domain='0x0000' bus='0x81'", "domain='0x0000:0x81' bus=''")
        exc = self.assertRaises(exception.NodeDeviceXMLInvalid,
                                nodedev.parse_node_device, xml)
        self.assertIn('address domain', str(exc))
        pci = X.pci('0000:84:00.0').replace('<bus>132</bus>',
                                            '<bus>132.0</bus>')
        exc = self.assertRaises(exception.NodeDeviceXMLInvalid,
                                nodedev.parse_node_device, pci)
        self.assertIn("bus '132.0' is not an integer", str(exc))


class NamesTest(testtools.TestCase):

    def test_pci_address_from_name(self):
        table = [('pci_0000_84_00_0', '0000:84:00.0'),
                 ('pci_0000_D8_1F_7', '0000:d8:1f.7'),
                 ('pci_0000_84_00', None), ('pci_0000_84_00_8', None),
                 ('mtty_mtty', None), (None, None), ('', None)]
        for name, expected in table:
            self.assertEqual(expected, nodenames.pci_address_from_name(name),
                             name)

    def test_mdev_uuid_from_name(self):
        under = UUID1.replace('-', '_')
        table = [('mdev_' + under, UUID1),
                 ('mdev_' + under + '_0000_84_00_0', UUID1),
                 ('mdev_' + under.upper(), UUID1),
                 ('mdev_' + under + 'x', None),
                 ('mdev_' + under[:-1], None),
                 ('pci_0000_84_00_0', None), (None, None)]
        for name, expected in table:
            self.assertEqual(expected, nodenames.mdev_uuid_from_name(name),
                             name)
