"""The destination guest XML of a live migration (virt/libvirt/migration).

The source document is a Nova-like guest (metadata in Nova's namespace,
disk, interface, console, graphics, an mdev and a PCI hostdev with their
guest-side addresses, a comment) that libvirt's own test driver accepts
with ``VIR_DOMAIN_DEFINE_VALIDATE``; the source handed to the rewrite is
what libvirt gives back for it (``XMLDesc(VIR_DOMAIN_XML_MIGRATABLE)``).
"Nothing else changes" is proven by walking both documents in parallel:
the only differences are the host-device attributes of the mapped
hostdevs, and libvirt accepts the result.
"""

from xml.etree import ElementTree

import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import migration

libvirt.registerErrorHandler(lambda *args: None, None)

SRC_MDEV = '4b20d080-1b54-4048-85b3-a6a62d165c01'
DST_MDEV = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
SRC_VF = '0000:81:00.1'
DST_VF = '0000:82:00.3'

GUEST = """<domain type='test'>
  <name>instance-0000002a</name>
  <uuid>6a1b5f0e-2c3d-4e5f-8a9b-0c1d2e3f4a5b</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:name>vgpu-guest</nova:name>
      <nova:flavor name="gpu.small"><nova:memory>4096</nova:memory></nova:flavor>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>4194304</memory>
  <currentMemory unit='KiB'>4194304</currentMemory>
  <vcpu placement='static' cpuset='0-3'>4</vcpu>
  <cputune><shares>4096</shares></cputune>
  <sysinfo type='smbios'>
    <system><entry name='manufacturer'>OpenStack Foundation</entry><entry name='serial'>6a1b5f0e-2c3d-4e5f-8a9b-0c1d2e3f4a5b</entry></system>
  </sysinfo>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/><smbios mode='sysinfo'/></os>
  <features><acpi/><apic/></features>
  <cpu mode='host-model' check='partial'><topology sockets='4' dies='1' cores='1' threads='1'/></cpu>
  <clock offset='utc'><timer name='pit' tickpolicy='delay'/><timer name='rtc' tickpolicy='catchup'/></clock>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <!-- the guest's devices, as Nova writes them -->
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='none'/>
      <source file='/var/lib/nova/instances/6a1b5f0e/disk'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='bridge'>
      <mac address='fa:16:3e:12:34:56'/>
      <source bridge='br-int'/>
      <model type='virtio'/>
    </interface>
    <serial type='pty'><target port='0'/></serial>
    <graphics type='vnc' port='-1' autoport='yes' listen='0.0.0.0'/>
    <video><model type='virtio' heads='1' primary='yes'/></video>
    <hostdev mode='subsystem' type='mdev' managed='no' model='vfio-pci' display='off'>
      <source><address uuid='4b20d080-1b54-4048-85b3-a6a62d165c01'/></source>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x1'/></source>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x06' function='0x0'/>
    </hostdev>
    <memballoon model='virtio'><stats period='10'/></memballoon>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
  </devices>
</domain>"""


def differences(a, b, path):
    """``[(path, what, a's value, b's value)]`` between two elements."""
    if a.tag != b.tag:
        return [(path, 'tag', a.tag, b.tag)]
    out = [(path, '@' + key, a.get(key), b.get(key))
           for key in sorted(set(a.attrib) | set(b.attrib))
           if a.get(key) != b.get(key)]
    for what in ('text', 'tail'):
        if (getattr(a, what) or '') != (getattr(b, what) or ''):
            out.append((path, what, getattr(a, what), getattr(b, what)))
    if len(a) != len(b):
        return out + [(path, 'children', len(a), len(b))]
    for index, (x, y) in enumerate(zip(a, b)):
        tag = x.tag if isinstance(x.tag, str) else 'comment()'
        out.extend(differences(x, y, '%s/%s[%d]' % (path, tag, index)))
    return out


def path_of(root, target):
    """``target``'s path in the form :func:`differences` writes."""
    parents = {child: parent for parent in root.iter() for child in parent}
    parts = []
    while target is not root:
        parent = parents[target]
        parts.append('%s[%d]' % (target.tag, list(parent).index(target)))
        target = parent
    return '/'.join([root.tag] + parts[::-1])


class LibvirtTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)

    def define(self, xml, flags=0):
        """Define ``xml`` with libvirt's validation, return its XMLDesc."""
        dom = self.conn.defineXMLFlags(xml,
                                       libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        try:
            return dom.XMLDesc(flags)
        finally:
            dom.undefine()


class DestinationXMLTest(LibvirtTestCase):

    def source_xml(self):
        xml = self.define(GUEST, libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        # libvirt drops comments; put the one of GUEST back in so that
        # the rewrite has one to keep.
        return xml.replace('<devices>', '<devices>\n    <!-- ours -->', 1)

    def test_only_the_host_devices_change(self):
        source = self.source_xml()
        result = migration.destination_xml(
            source, {SRC_MDEV: DST_MDEV, SRC_VF: DST_VF})
        before = migration.parse_domain(source)
        after = migration.parse_domain(result)
        mdev, pci = [path_of(before, el.find('source/address'))
                     for el in before.findall('devices/hostdev')]
        self.assertEqual([
            (mdev, '@uuid', SRC_MDEV, DST_MDEV),
            (pci, '@bus', '0x81', '0x82'),
            (pci, '@function', '0x1', '0x3'),
        ], differences(before, after, 'domain'))
        # The comment, the guest-side addresses and Nova's namespaced
        # metadata are among what compared equal.
        self.assertIn('<!-- ours -->', result)
        self.assertIn('nova:flavor', result)
        self.define(result)

    def test_libvirt_reads_the_destination_devices_back(self):
        result = migration.destination_xml(
            self.source_xml(), {SRC_MDEV: DST_MDEV, SRC_VF: DST_VF})
        back = ElementTree.fromstring(self.define(result))
        sources = [el.find('source/address').attrib
                   for el in back.findall('devices/hostdev')]
        self.assertEqual([{'uuid': DST_MDEV}, {
            'domain': '0x0000', 'bus': '0x82', 'slot': '0x00',
            'function': '0x3'}], sources)

    def test_spelling_of_the_mapping_does_not_matter(self):
        result = migration.destination_xml(GUEST, {
            SRC_MDEV.upper(): DST_MDEV.upper(), SRC_VF.upper(): DST_VF})
        self.assertIn("uuid=\"%s\"" % DST_MDEV, result)

    def test_a_domain_without_hostdevs_needs_an_empty_mapping(self):
        xml = "<domain type='test'><name>x</name><devices><disk " \
              "type='file'/></devices></domain>"
        self.assertEqual(ElementTree.canonicalize(xml),
                         ElementTree.canonicalize(
                             migration.destination_xml(xml, {})))


class RefusalTest(testtools.TestCase):

    CASES = [
        ({SRC_VF: DST_VF}, 'hostdev %s of the source domain has no '
         'destination device' % SRC_MDEV),
        ({SRC_MDEV: DST_MDEV, SRC_VF: DST_VF, '0000:81:00.2': DST_VF},
         'given to more than one hostdev'),
        ({SRC_MDEV: DST_MDEV, SRC_VF: DST_VF,
          '11111111-2222-4333-8444-555555555555': '0000:82:00.4'},
         'no hostdev of the source domain uses '
         '11111111-2222-4333-8444-555555555555'),
        ({SRC_MDEV: DST_VF, SRC_VF: DST_MDEV}, 'cannot move to'),
    ]

    def test_refusals_name_the_device(self):
        for mapping, message in self.CASES:
            exc = self.assertRaises(exception.LiveMigrationRefused,
                                    migration.destination_xml, GUEST,
                                    mapping)
            self.assertIn(message, str(exc))
            self.assertIn('Cannot live-migrate the guest XML', str(exc))

    def test_a_device_twice_in_the_domain_is_refused(self):
        start = GUEST.index("<hostdev mode='subsystem' type='pci'")
        hostdev = GUEST[start:GUEST.index('</hostdev>', start) +
                        len('</hostdev>')]
        twice = GUEST.replace(hostdev, hostdev + hostdev)
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                migration.destination_xml, twice,
                                {SRC_MDEV: DST_MDEV, SRC_VF: DST_VF})
        self.assertIn('%s appears twice' % SRC_VF, str(exc))

    def test_bad_documents_are_libvirt_xml_errors(self):
        for bad, message in [('<domain', 'malformed XML'),
                             ('<device/>', 'got <device> instead'),
                             ("<domain><devices><hostdev mode='subsystem' "
                              "type='mdev'/></devices></domain>", 'uuid')]:
            exc = self.assertRaises(exception.LibvirtXmlError,
                                    migration.destination_xml, bad, {})
            self.assertIn(message, str(exc))

    def test_a_destination_of_the_wrong_kind_is_refused(self):
        for mapping, message in [
                ({SRC_MDEV: 'gpu-0', SRC_VF: DST_VF},
                 'cannot move to gpu-0: not an mdev UUID'),
                ({SRC_MDEV: DST_MDEV, SRC_VF: 'mtty'},
                 'cannot move to mtty: not a PCI address')]:
            exc = self.assertRaises(exception.LiveMigrationRefused,
                                    migration.destination_xml, GUEST,
                                    mapping)
            self.assertIn(message, str(exc))

    def test_a_malformed_mapping_value_names_it(self):
        exc = self.assertRaises(exception.InvalidPciAddress,
                                migration.destination_xml, GUEST,
                                {SRC_MDEV: '0000:zz'})
        self.assertIn("'0000:zz'", str(exc))
