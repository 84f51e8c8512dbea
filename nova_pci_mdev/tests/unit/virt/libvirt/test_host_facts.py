"""host_facts: what an emulated host needs of its file, cached by digest."""

import json
import os

import fixtures
import libvirt
import testtools

from nova_pci_mdev import data
from nova_pci_mdev.virt.libvirt.emulated import host as emulated
from nova_pci_mdev.virt.libvirt.emulated import host_facts


class HostFactsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.conn = libvirt.open(data.sample_connection_uri())
        self.addCleanup(self.conn.close)
        self.sidecar = emulated.load_sidecar(data.SAMPLE_HOST_TOPOLOGY)

    def host(self):
        return emulated.EmulatedHost(self.conn, self.state, self.sidecar)

    def test_cache_gives_what_parsing_gives(self):
        parsed = self.host()
        facts = parsed.facts()
        self.assertEqual(host_facts.from_devices(parsed._file_devices()),
                         facts)
        self.assertIn(('mtty', 'mtty-1'), facts.capacity)
        cached = self.host()
        self.assertEqual(facts, cached.facts())
        self.assertIsNone(cached._parsed)       # nothing parsed for it
        self.assertEqual(parsed.numa_topology(), cached.numa_topology())

    def test_bad_cache_means_parse_again(self):
        facts = self.host().facts()
        path = os.path.join(self.state, host_facts.FILE)
        with open(path) as f:
            doc = json.load(f)
        for bad in ('not json', json.dumps(dict(doc, version=0)),
                    json.dumps(dict(doc, capacity=[['x', 't', -1]])),
                    json.dumps(dict(doc, numa_nodes=['0'])),
                    json.dumps(dict(doc, digest='other'))):
            with open(path, 'w') as f:
                f.write(bad)
            again = self.host()
            self.assertEqual(facts, again.facts())
            self.assertIsNotNone(again._parsed, bad[:40])
