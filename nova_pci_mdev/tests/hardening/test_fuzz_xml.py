"""Fuzzing the XML the host hands us: node-device XML, capabilities XML,
guest XML; entity expansion; lone surrogates.

Property of every test here: the parser returns values that keep its
module's invariants (canonical addresses, 4-digit lower-case ids, safe type
names, non-negative counts) or raises its own project exception naming the
device, document or file; nothing else escapes, and no DTD or entity is
ever expanded. Node-device XML also goes through the real entry point,
``Host.discover`` over a stub connection, and then the tracker.
"""

import html
import json
import os

import fixtures
from hypothesis import given
from hypothesis import strategies as st
import libvirt

from nova_pci_mdev import conf
from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev import objects
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import node_device_xml as fx
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import strategies as hs
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt.emulated import host as emulated

objects.register_all()
libvirt.registerErrorHandler(lambda *args: None, None)

NOVA_CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
device_spec = {"mdev_type": "mtty-*"}
device_spec = {"vendor_id": "8086"}
[devices]
enabled_mdev_types = nvidia-35, mtty-1
"""

#: What a refused XML document raises: bad input, or a host description
#: that cannot be used.
REFUSED = (exception.Invalid, exception.HostDescriptionInvalid)


def listing(host):
    """``host.devices()``; a device it left out (what a refused document
    becomes in a listing: the rest of the host stays usable) is raised; a
    count it capped is not a refusal (the device is listed)."""
    found = host.devices()
    left_out = [p for p in host.left_out
                if isinstance(p, exception.NodeDeviceLeftOut)]
    if left_out:
        raise left_out[0]
    return found


class _StubDevice(object):
    def __init__(self, name, xml):
        self._name, self._xml = name, xml

    def name(self):
        return self._name

    def XMLDesc(self, flags=0):  # noqa: N802 (libvirt's spelling)
        return self._xml

    def isActive(self):  # noqa: N802
        return 1


class StubConnection(object):
    """A connection that lists the given node-device XML documents."""

    def __init__(self, xmls):
        self.devices = [_StubDevice('dev%d' % i, xml)
                        for i, xml in enumerate(xmls)]

    def listAllDevices(self, flags=0):  # noqa: N802
        return list(self.devices)

    def getHostname(self):  # noqa: N802
        return 'fuzz-host'

    def getCapabilities(self):  # noqa: N802
        return fx.FAKE.capabilities_xml()


class NodeDeviceFuzzTest(recorder.HardeningTestCase):

    def assertParsed(self, found):
        if found is None:
            return
        if isinstance(found, nodedev.Mdev):
            self.assertEqual(found.uuid, names.normalize_uuid(found.uuid))
            names.validate_mdev_type(found.mdev_type)
            return
        if found.address is not None or not isinstance(
                found, nodedev.OtherMdevParent):
            self.assertEqual(found.address,
                             names.normalize_address(found.address))
        for kind in found.mdev_types:
            names.validate_mdev_type(kind.id)
            self.assertIsInstance(kind.available_instances, int)
            self.assertGreaterEqual(kind.available_instances, 0)
            # What the objects, Nova's columns and Placement hold.
            self.assertLessEqual(kind.available_instances, nodedev.MAX_COUNT)
        if isinstance(found, nodedev.PciFunction):
            self.assertTrue(names.is_pci_address(found.address))
            for value in (found.vendor_id, found.product_id):
                self.assertRegex(value, r'\A[0-9a-f]{4}\Z')
            self.assertTrue(found.numa_node is None or
                            0 <= found.numa_node <= nodedev.MAX_COUNT)
            for vf in found.virt_functions:
                self.assertTrue(names.is_pci_address(vf))

    def test_node_device_xml(self):
        with self.record('fuzz', 'node-device XML: PCI functions, SR-IOV, '
                         'mdev_types, virtual parents, mdevs; generated, '
                         'mutated and raw (nodedev.parse_node_device)',
                         'records keeping the invariants or '
                         'NodeDeviceXMLInvalid naming the device') as row:

            @recorder.examples(200, 3000)
            @given(fx.node_device_xml)
            def check(xml):
                row.cases += 1
                try:
                    found = nodedev.parse_node_device(xml, 'listed-name')
                except exception.NodeDeviceXMLInvalid as exc:
                    self.assertTrue(exc.kwargs['device'])
                    self.assertIn(str(exc.kwargs['device']), str(exc))
                    return
                self.assertParsed(found)

            check()

    def test_discovery_of_fuzzed_hosts(self):
        with self.record('fuzz', 'a host listing fuzzed node devices '
                         '(Host.discover -> tracker sync)',
                         'device records and a synced tracker, or a '
                         'project exception naming the device') as row:
            settings = conf.load_settings(self._conf())

            @recorder.examples(60, 800)
            @given(st.lists(fx.node_device_xml, max_size=5).map(
                lambda extra: fx.VALID_XMLS + extra))
            def check(xmls):
                row.cases += 1
                host = host_mod.Host(StubConnection(xmls), 'fuzz-host')
                try:
                    records = host.discover(settings)
                    tracker = manager.PciDevTracker(
                        settings.whitelist, host.numa_topology())
                    tracker.sync(records)
                except exception.NodeDeviceXMLInvalid as exc:
                    # It names a device of the listing: its listed name or
                    # the <name> its XML gives.
                    device = str(exc.kwargs['device'])
                    self.assertIn(device, str(exc))
                    self.assertTrue(
                        device in {'dev%d' % i for i in range(len(xmls))}
                        or any(device in html.unescape(x) for x in xmls),
                        exc)
                    return
                for record in records:
                    self.assertEqual(record['address'],
                                     names.normalize_address(
                                         record['address']))

            check()

    def _conf(self):
        path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(path, 'w') as handle:
            handle.write(NOVA_CONF)
        return conf.new_config([path])


cell_xml = st.builds(
    lambda cid, unit, mem, cpus:
    "<cell id='%s'><memory unit='%s'>%s</memory><cpus num='%d'>%s</cpus>"
    '</cell>' % (cid, unit, mem, len(cpus), ''.join(
        "<cpu id='%s' socket_id='%s'/>" % c for c in cpus)),
    fx.number(['0', '1', '2']), fx.one_of_valid(['KiB', 'GiB', 'b', 'TB']),
    fx.number(['16777216', '0', '1']),
    st.lists(st.tuples(fx.number(['0', '1', '7']), fx.number(['0', '1'])),
             max_size=3))
capabilities_xml = st.one_of(
    st.lists(cell_xml, max_size=3).map(
        lambda cells: '<capabilities><host><topology><cells num="%d">%s'
        '</cells></topology></host></capabilities>'
        % (len(cells), ''.join(cells))),
    st.just(fx.FAKE.capabilities_xml()).flatmap(fx._mutations),
    hs.encodable_text)


class CapabilitiesFuzzTest(recorder.HardeningTestCase):

    def test_capabilities_xml(self):
        with self.record('fuzz', 'capabilities XML: NUMA cells, memory '
                         'units, cpus and socket ids '
                         '(capabilities.parse_topology)',
                         'a topology of unique non-negative cells or '
                         'CapabilitiesXMLInvalid naming the value') as row:

            @recorder.examples(200, 3000)
            @given(capabilities_xml)
            def check(xml):
                row.cases += 1
                try:
                    topology = capabilities.parse_topology(xml)
                except exception.CapabilitiesXMLInvalid as exc:
                    self.assertTrue(exc.kwargs['reason'])
                    return
                ids = [c.id for c in topology.cells]
                self.assertEqual(len(ids), len(set(ids)))
                for cell in topology.cells:
                    self.assertGreaterEqual(cell.id, 0)
                    self.assertGreaterEqual(cell.memory_kb, 0)
                    self.assertTrue(cell.socket is None or cell.socket >= 0)

            check()

    def test_unicode_digit_cell_id(self):
        # Regression for the fuzz finding above: str.isdigit() accepts
        # superscripts that int() refuses.
        with self.record('fuzz', "capabilities cell id '\u00b2' "
                         '(regression)',
                         'CapabilitiesXMLInvalid naming the value') as row:
            row.cases += 1
            xml = ("<capabilities><host><topology><cells num='1'>"
                   "<cell id='\u00b2'/></cells></topology></host>"
                   '</capabilities>')
            exc = self.assertRaises(exception.CapabilitiesXMLInvalid,
                                    capabilities.parse_topology, xml)
            self.assertIn('\u00b2', str(exc))


hostdev_xml = st.one_of(
    st.builds(lambda uuid, model, display:
              "<hostdev mode='subsystem' type='mdev' model='%s' "
              "display='%s'><source><address uuid='%s'/></source></hostdev>"
              % (model, display, uuid),
              fx.one_of_valid([fx.UUID]), fx.one_of_valid(['vfio-pci']),
              fx.one_of_valid(['on', 'off'])),
    st.builds(lambda parts, managed:
              "<hostdev mode='subsystem' type='pci' managed='%s'><source>"
              '%s</source></hostdev>' % (managed, fx._address_xml(parts)),
              fx.address_attr, fx.one_of_valid(['yes', 'no'])),
    fx.one_of_valid(["<interface type='network'/>"]))
guest_xml = st.one_of(
    st.builds(lambda name, mem, unit, vcpu, devs:
              "<domain type='kvm'><name>%s</name><memory unit='%s'>%s"
              '</memory><vcpu>%s</vcpu><os><type>hvm</type></os>'
              '<devices>%s</devices></domain>'
              % (name, unit, mem, vcpu, ''.join(devs)),
              fx.one_of_valid(['instance-1']), fx.number(['524288', '0x10']),
              fx.one_of_valid(['KiB', 'G']), fx.number(['1', '4']),
              st.lists(hostdev_xml, max_size=3)),
    hs.encodable_text)


class GuestXmlFuzzTest(recorder.HardeningTestCase):

    def test_guest_xml(self):
        with self.record('fuzz', 'guest domain XML with hostdevs '
                         '(LibvirtConfigGuest.parse_str)',
                         'config objects that format back to the same '
                         'hostdevs, or LibvirtXmlError') as row:

            @recorder.examples(150, 4000)
            @given(guest_xml)
            def check(xml):
                row.cases += 1
                try:
                    guest = vconfig.LibvirtConfigGuest.parse_str(xml)
                except exception.LibvirtXmlError as exc:
                    self.assertTrue(exc.kwargs['element'])
                    return
                for dev in guest.hostdevs:
                    self.assertEqual(dev, type(dev).parse_str(dev.to_xml()))

            check()

    def test_text_after_a_raw_device(self):
        # Regression for the full run's finding: a raw device followed by
        # text inside <devices> is re-serialised with that text (its
        # tail), which ElementTree cannot read back.
        with self.record('fuzz', 'guest XML with text after a raw device '
                         '(regression)', 'the guest, which formats to XML '
                         'that parses back to the same guest') as row:
            row.cases += 1
            xml = ("<domain type='kvm'><name>i</name><devices>"
                   "<interface type='network'/>.</devices></domain>")
            guest = vconfig.LibvirtConfigGuest.parse_str(xml)
            out = guest.to_xml()
            self.assertNotIn('>.<', out.replace('\n', '').replace(' ', ''))
            again = vconfig.LibvirtConfigGuest.parse_str(out)
            self.assertEqual(guest, again)
            self.assertEqual(out, again.to_xml())


class SurrogateTest(recorder.HardeningTestCase):
    """Lone surrogates: a Python str (and JSON, as ``\\ud800``) holds them,
    UTF-8 cannot; the sidecar's extra_node_devices brings them to the XML
    parser from a file an operator writes."""

    def test_lone_surrogates_in_xml(self):
        with self.record('fuzz', 'XML text with a lone surrogate (every XML '
                         'entry point; reaches the parser from the '
                         'sidecar JSON)', "the parser's own exception (a "
                         'node device in a listing is left out and '
                         'reported)') as row:
            tmp = self.useFixture(fixtures.TempDir()).path
            sidecar = os.path.join(tmp, 'host_topology.json')

            def through_sidecar(xml):
                with open(sidecar, 'w') as handle:
                    json.dump({'extra_node_devices': [xml]}, handle)
                conn = libvirt.open(data.sample_connection_uri())
                try:
                    return listing(emulated.EmulatedHost(
                        conn, tmp, emulated.load_sidecar(sidecar)))
                finally:
                    conn.close()

            cases = (
                (nodedev.parse_node_device,
                 '<device><name>a\ud800</name></device>'),
                (lambda x: listing(host_mod.Host(StubConnection([x]), 'h')),
                 '<device><name>a\ud800</name></device>'),
                (capabilities.parse_topology,
                 '<capabilities>\ud800</capabilities>'),
                (vconfig.LibvirtConfigGuest.parse_str,
                 '<domain><name>\udfff</name></domain>'),
                (through_sidecar, '<device><name>mtty</name>\ud800</device>'),
            )
            for parse, xml in cases:
                row.cases += 1
                self.assertRaises(REFUSED, parse, xml)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE %(root)s [
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
  <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
  <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
]>
<%(root)s><name>&f;</name></%(root)s>"""
QUADRATIC = ('<!DOCTYPE %%(root)s [<!ENTITY q "%s">]><%%(root)s><name>%s'
             '</name></%%(root)s>' % ('q' * 20000, '&q;' * 2000))
EXTERNAL = ('<!DOCTYPE %(root)s [<!ENTITY s SYSTEM "file://%(secret)s">]>'
            '<%(root)s><name>&s;</name></%(root)s>')
PARAMETER = ('<!DOCTYPE %(root)s [<!ENTITY %% p SYSTEM "file://%(secret)s">'
             '%%p;]><%(root)s/>')
EXTERNAL_DTD = ('<!DOCTYPE %(root)s SYSTEM "file://%(secret)s">'
                '<%(root)s><name>x</name></%(root)s>')
UTF16_DOCTYPE = None      # built per root: the DTD in another encoding

ENTITY_ATTACKS = (('billion laughs (20^6 expansion)', BILLION_LAUGHS),
                  ('quadratic blow-up', QUADRATIC),
                  ('external entity (file://)', EXTERNAL),
                  ('parameter entity', PARAMETER),
                  ('external DTD', EXTERNAL_DTD),
                  ('UTF-16 document with an entity', UTF16_DOCTYPE))


class EntityExpansionTest(recorder.HardeningTestCase):
    """Every XML entry point refuses DTDs: nothing is expanded or read."""

    SECRET = 'top-secret-%d' % os.getpid()

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.secret = os.path.join(tmp, 'secret')
        with open(self.secret, 'w') as handle:
            handle.write(self.SECRET)

    def _doc(self, template, root):
        if template is None:
            return (BILLION_LAUGHS % {'root': root}).replace(
                'version="1.0"', 'version="1.0" encoding="UTF-16"').encode(
                    'utf-16')
        return template % {'root': root, 'secret': self.secret}

    def _entry_points(self):
        """(name, root element, callable(xml) that must refuse)."""
        def discover(xml):
            return listing(host_mod.Host(StubConnection([xml]), 'fuzz-host'))

        def sidecar(xml):
            path = self.secret + '_topology.json'
            with open(path, 'w') as handle:
                if isinstance(xml, bytes):     # JSON holds text
                    xml = xml.decode('utf-16').replace(
                        ' encoding="UTF-16"', '')
                json.dump({'extra_node_devices': [xml]}, handle)
            conn = libvirt.open(data.sample_connection_uri())
            try:
                return listing(emulated.EmulatedHost(
                    conn, os.path.dirname(path), emulated.load_sidecar(path)))
            finally:
                conn.close()

        return (
            ('nodedev.parse_node_device', 'device',
             nodedev.parse_node_device),
            ('Host.devices (libvirt listing)', 'device', discover),
            ('capabilities.parse_topology', 'capabilities',
             capabilities.parse_topology),
            ('LibvirtConfigGuest.parse_str', 'domain',
             vconfig.LibvirtConfigGuest.parse_str),
            ('LibvirtConfigNodeDeviceMdev.parse_str', 'device',
             vconfig.LibvirtConfigNodeDeviceMdev.parse_str),
            ('sidecar extra_node_devices', 'device', sidecar),
        )

    def test_entity_attacks_are_refused(self):
        for attack, template in ENTITY_ATTACKS:
            with self.record('fuzz', 'XML entity attack: %s' % attack,
                             'refused (DOCTYPE/ENTITY) by every XML entry '
                             'point, nothing expanded or read') as row:
                for name, root, parse in self._entry_points():
                    row.cases += 1
                    xml = self._doc(template, root)
                    try:
                        result = parse(xml)
                    except REFUSED as exc:
                        self.assertRegex(str(exc), 'DOCTYPE|ENTITY|entity',
                                         '%s: %s' % (name, exc))
                        self.assertNotIn(self.SECRET, str(exc))
                        continue
                    self.fail('%s accepted %s: %r' % (name, attack,
                                                      result)[:300])

    def test_random_dtds_are_refused(self):
        with self.record('fuzz', 'XML with generated DOCTYPE/ENTITY '
                         'declarations (nodedev, capabilities, guest)',
                         'refused, never expanded') as row:

            @recorder.examples(60, 2000)
            @given(st.sampled_from(['device', 'capabilities', 'domain']),
                   st.lists(st.tuples(st.from_regex(r'\A[a-z]{1,5}\Z'),
                                      hs.encodable_text.map(hs.xml_escape)),
                            min_size=1, max_size=4),
                   st.booleans())
            def check(root, entities, reference):
                row.cases += 1
                decls = ''.join('<!ENTITY %s "%s">' % (n, v.replace('"', ''))
                                for n, v in entities)
                body = '&%s;' % entities[0][0] if reference else 'x'
                xml = '<!DOCTYPE %s [%s]><%s><name>%s</name></%s>' % (
                    root, decls, root, body, root)
                parse = {'device': nodedev.parse_node_device,
                         'capabilities': capabilities.parse_topology,
                         'domain': vconfig.LibvirtConfigGuest.parse_str}[root]
                exc = self.assertRaises(REFUSED, parse, xml)
                self.assertIn('DOCTYPE', str(exc))

            check()
