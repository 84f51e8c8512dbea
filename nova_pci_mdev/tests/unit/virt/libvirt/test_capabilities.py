"""Host NUMA topology: real test driver capabilities, XML cases, sidecar."""

import json
import os

import fixtures
import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
from nova_pci_mdev.virt.libvirt import capabilities


def caps(cells_xml):
    return ('<capabilities><host><topology><cells num="2">%s</cells>'
            '</topology></host></capabilities>' % cells_xml)


def cell(cell_id, cpus='', memory="<memory unit='KiB'>1024</memory>"):
    return "<cell id='%s'>%s<cpus>%s</cpus></cell>" % (cell_id, memory, cpus)


def cpu(cpu_id, socket=None):
    socket_xml = '' if socket is None else " socket_id='%s'" % socket
    return "<cpu id='%s'%s core_id='0' siblings='%s'/>" % (
        cpu_id, socket_xml, cpu_id)


def open_test_driver(test, uri):
    libvirt.registerErrorHandler(lambda *a: None, None)
    conn = libvirt.open(uri)
    test.addCleanup(conn.close)
    return conn


class RealTestDriverTest(testtools.TestCase):

    def test_default_host_has_two_cells(self):
        conn = open_test_driver(self, 'test:///default')
        topology = capabilities.parse_topology(conn.getCapabilities())
        self.assertEqual(
            numa.HostTopology(cells=(
                numa.HostCell(id=0, socket=0, cpus=frozenset(range(8)),
                              memory_kb=2097152),
                numa.HostCell(id=1, socket=1, cpus=frozenset(range(8, 16)),
                              memory_kb=4194304))),
            topology)

    def test_custom_file_host_has_no_cells_then_sidecar(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        host_path = os.path.join(tmp, 'host.xml')
        with open(host_path, 'w') as handle:
            handle.write(X.host(X.pci('0000:00:1f.6', numa=1)))
        conn = open_test_driver(self, 'test://' + host_path)
        topology = capabilities.parse_topology(conn.getCapabilities())
        self.assertEqual((), topology.cells)

        sidecar = os.path.join(tmp, 'topology.json')
        with open(sidecar, 'w') as handle:
            json.dump({'cells': [
                {'id': 0, 'socket': 0, 'cpus': [0, 1], 'memory_kb': 1024},
                {'id': 1, 'socket': 1, 'cpus': [2, 3]}]}, handle)
        self.assertEqual(
            numa.HostTopology(cells=(
                numa.HostCell(id=0, socket=0, cpus=frozenset({0, 1}),
                              memory_kb=1024),
                numa.HostCell(id=1, socket=1, cpus=frozenset({2, 3})))),
            capabilities.load_topology_sidecar(sidecar))


class ParseTopologyTest(testtools.TestCase):

    def test_table(self):
        table = [
            ('no topology element', '<capabilities><host/></capabilities>',
             ()),
            ('cells sorted by id, no socket ids',
             caps(cell(1, cpu(2)) + cell(0, cpu(0) + cpu(1))),
             (numa.HostCell(id=0, cpus=frozenset({0, 1}), memory_kb=1024),
              numa.HostCell(id=1, cpus=frozenset({2}), memory_kb=1024))),
            ('cell spanning two sockets has no socket',
             caps(cell(0, cpu(0, 0) + cpu(1, 1))),
             (numa.HostCell(id=0, cpus=frozenset({0, 1}),
                            memory_kb=1024),)),
            ('two cells on one socket (sub-NUMA clustering)',
             caps(cell(0, cpu(0, 0)) + cell(1, cpu(1, 0))),
             (numa.HostCell(id=0, socket=0, cpus=frozenset({0}),
                            memory_kb=1024),
              numa.HostCell(id=1, socket=0, cpus=frozenset({1}),
                            memory_kb=1024))),
            ('memory in MiB, cell without cpus',
             caps(cell(0, memory="<memory unit='MiB'>2</memory>")),
             (numa.HostCell(id=0, memory_kb=2048),)),
            ('memory without unit is KiB; no memory is 0',
             caps(cell(0, memory='<memory>7</memory>') +
                  cell(1, memory='')),
             (numa.HostCell(id=0, memory_kb=7), numa.HostCell(id=1))),
        ]
        for case, xml, cells in table:
            self.assertEqual(numa.HostTopology(cells=cells),
                             capabilities.parse_topology(xml), case)

    def test_bad(self):
        table = [
            ('malformed', '<capabilities>', 'malformed'),
            ('doctype', '<!DOCTYPE capabilities [<!ENTITY a "b">]>'
             '<capabilities/>', 'DOCTYPE'),
            ('wrong root', '<node/>', '<node>'),
            ('cell id', caps(cell('x')), "cell id 'x'"),
            ('negative cell id', caps(cell(-1)), "cell id '-1'"),
            ('duplicate cell', caps(cell(0) + cell(0)), 'appears twice'),
            ('cpu id', caps(cell(0, cpu('a'))), "cell 0 cpu id 'a'"),
            ('socket id', caps(cell(0, cpu(0, 'z'))), "socket_id 'z'"),
            ('memory unit', caps(cell(0, memory="<memory unit='parsec'>1"
                                                "</memory>")), 'parsec'),
            ('memory value', caps(cell(0, memory='<memory>lots</memory>')),
             "cell 0 memory 'lots'"),
        ]
        for case, xml, word in table:
            exc = self.assertRaises(exception.CapabilitiesXMLInvalid,
                                    capabilities.parse_topology, xml)
            self.assertIn(word, str(exc), case)


class SidecarTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, text, name='topology.json'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def test_minimal_cell(self):
        path = self.write('{"cells": [{"id": 3}]}')
        self.assertEqual(numa.HostTopology(cells=(numa.HostCell(id=3),)),
                         capabilities.load_topology_sidecar(path))

    def test_empty_cells(self):
        path = self.write('{"cells": []}')
        self.assertEqual(numa.HostTopology(),
                         capabilities.load_topology_sidecar(path))

    def test_bad_documents(self):
        table = [
            ('not JSON', '{cells', 'not valid JSON'),
            ('not an object', '[]', 'expected an object'),
            ('cells missing', '{}', 'expected an object'),
            ('cells not a list', '{"cells": {}}', 'expected an object'),
            ('unknown top key', '{"cells": [], "nodes": 1}',
             'unknown key(s) nodes'),
            ('cell not object', '{"cells": [1]}', 'cells[0]: expected'),
            ('unknown cell key', '{"cells": [{"id": 0, "cpu": [1]}]}',
             'cells[0]: unknown key(s) cpu'),
            ('id missing', '{"cells": [{"socket": 0}]}', 'id None'),
            ('id negative', '{"cells": [{"id": -1}]}', 'id -1'),
            ('id boolean', '{"cells": [{"id": true}]}', 'id True'),
            ('id twice', '{"cells": [{"id": 0}, {"id": 0}]}',
             'cells[1]: id 0 appears twice'),
            ('socket string', '{"cells": [{"id": 0, "socket": "0"}]}',
             "socket '0'"),
            ('cpus not list', '{"cells": [{"id": 0, "cpus": "0-3"}]}',
             "cpus '0-3'"),
            ('cpu negative', '{"cells": [{"id": 0, "cpus": [0, -1]}]}',
             'cpus [0, -1]'),
            ('cpu in two cells', '{"cells": [{"id": 0, "cpus": [0, 1]}, '
             '{"id": 1, "cpus": [1]}]}', 'cpu 1 is in cells 0 and 1'),
            ('memory float', '{"cells": [{"id": 0, "memory_kb": 1.5}]}',
             'memory_kb 1.5'),
        ]
        for case, text, word in table:
            path = self.write(text)
            exc = self.assertRaises(exception.TopologySidecarInvalid,
                                    capabilities.load_topology_sidecar, path)
            self.assertIn(word, str(exc), case)
            self.assertIn(path, str(exc), case)

    def test_missing_file(self):
        path = os.path.join(self.tmp, 'absent.json')
        exc = self.assertRaises(exception.TopologySidecarInvalid,
                                capabilities.load_topology_sidecar, path)
        self.assertIn('cannot read', str(exc))
        self.assertIn(path, str(exc))


class FromNumaNodesTest(testtools.TestCase):

    def test_cells_from_device_nodes(self):
        self.assertEqual(
            numa.HostTopology(cells=(numa.HostCell(id=0),
                                     numa.HostCell(id=2))),
            capabilities.topology_from_numa_nodes([2, None, 0, 2]))
        self.assertEqual(numa.HostTopology(),
                         capabilities.topology_from_numa_nodes([None]))

    def test_bad_node(self):
        exc = self.assertRaises(exception.InvalidValue,
                                capabilities.topology_from_numa_nodes,
                                [0, '1'])
        self.assertIn("'1'", str(exc))
