"""A sync runs when its input changed, and only then (nova_pci_mdev.compute.synced).

The CLI in process on a copy of the bundled sample host (the real libvirt
test driver, the real SQLite store): every input the records depend on
must make the next command see the change, and an unchanged host must not
be written at all.
"""

import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import sqlite3

import fixtures
import testtools

import nova_pci_mdev
from nova_pci_mdev import data
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.compute import synced
from nova_pci_mdev.virt.libvirt import listing

INSTANCE = '0b6d1e7c-3f0a-4c2b-9d8e-1a2b3c4d5e6f'
VF = '0000:af:02.1'


class SyncedTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.host_xml = os.path.join(self.tmp, 'host.xml')
        shutil.copy(data.SAMPLE_HOST_XML, self.host_xml)
        shutil.copy(data.SAMPLE_HOST_TOPOLOGY,
                    os.path.join(self.tmp, 'host_topology.json'))
        self.conf = os.path.join(self.tmp, 'nova.conf')
        shutil.copy(data.SAMPLE_NOVA_CONF, self.conf)
        self.state = os.path.join(self.tmp, 'state')

    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--connection', 'test://' + self.host_xml,
                         '--config-file', self.conf, '--state-dir',
                         self.state] + list(argv), out=out, err=err)
        self.assertEqual(0, code, err.getvalue())
        return out.getvalue()

    def devices(self):
        return {d['address']: d for d in json.loads(
            self.run_cli('--format', 'json', 'devices'))}

    def generation(self):
        conn = sqlite3.connect(os.path.join(self.state, 'state.db'))
        try:
            return int(conn.execute("SELECT value FROM store_info WHERE "
                                    "key = 'generation'").fetchone()[0])
        finally:
            conn.close()

    def test_an_unchanged_host_is_not_written_again(self):
        first = self.devices()
        generation = self.generation()
        self.assertEqual(first, self.devices())
        self.run_cli('pools')
        self.run_cli('inventory')
        self.assertEqual(generation, self.generation())

    def test_a_created_mdev_is_seen_by_the_next_command(self):
        self.devices()
        out = self.run_cli('--format', 'json', 'claim', '--extra-spec',
                           'pci_passthrough:alias=vGPU:1', '--instance',
                           INSTANCE)
        slot = json.loads(out)['devices'][0]['address']
        after = self.devices()[slot]
        self.assertEqual('true', after['extra_info']['mdev_exists'])
        self.assertEqual('allocated', after['status'])
        self.run_cli('release', '--instance', INSTANCE)
        again = self.devices()[slot]
        self.assertEqual('available', again['status'])
        self.assertEqual('true', again['extra_info']['mdev_exists'])

    def test_a_changed_host_file_is_seen(self):
        self.assertIn(VF, self.devices())
        with open(self.host_xml) as f:
            text = f.read()
        name = 'pci_' + re.sub('[:.]', '_', VF)
        start = text.index('<device>\n    <name>%s</name>' % name)
        end = text.index('</device>', start) + len('</device>')
        with open(self.host_xml, 'w') as f:
            f.write(text[:start] + text[end:])
        self.assertNotIn(VF, self.devices())

    def test_a_changed_configuration_is_seen(self):
        self.assertTrue(self.devices()[VF]['whitelisted'])
        self.assertIn('configuration OK', self.run_cli('check-config'))
        with open(self.conf) as f:
            text = f.read()
        with open(self.conf, 'w') as f:
            f.write(text.replace('"product_id": "154c"',
                                 '"product_id": "ffff"'))
        self.assertFalse(self.devices()[VF]['whitelisted'])
        self.assertIn('ffff', self.run_cli('check-config'))


class StoredViewTest(SyncedTest):
    """``devices``, ``pools``, ``inventory`` and ``check-config`` answer
    from the store without building a tracker when the last sync still
    holds (ComputeHost.stored_view): the same text as from a session."""

    COMMANDS = (('devices',), ('pools',), ('inventory',), ('check-config',))

    def store_sql(self, sql, *args):
        conn = sqlite3.connect(os.path.join(self.state, 'state.db'))
        try:
            with conn:
                conn.execute(sql, args)
        finally:
            conn.close()

    def outputs(self):
        return {(fmt,) + command: self.run_cli('--format', fmt, *command)
                for fmt in ('table', 'json') for command in self.COMMANDS}

    def stored_view(self):
        settings = nova_pci_mdev.load_settings([self.conf])
        with nova_pci_mdev.open_compute_host(
                'test://' + self.host_xml, self.state, settings) as host:
            return host.stored_view()

    def test_views_from_the_store_equal_a_session(self):
        self.run_cli('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:1',
                     '--instance', INSTANCE)
        view = self.stored_view()
        self.assertIsNotNone(view)
        self.assertEqual([INSTANCE], list(view.instances))
        stored = self.outputs()
        generation = self.generation()
        # Without the recorded pools every view syncs in a session (which
        # records them again): the same text.
        for key in stored:
            self.store_sql("DELETE FROM store_info WHERE key = 'pools'")
            self.assertIsNone(self.stored_view())
            self.assertEqual(stored[key], self.run_cli('--format', *key),
                             key)
        self.assertIsNotNone(self.stored_view())
        self.assertLess(generation, self.generation())

    def test_a_changed_host_is_not_answered_from_the_store(self):
        self.devices()
        self.assertIsNotNone(self.stored_view())
        with open(self.host_xml) as f:
            text = f.read()
        with open(self.host_xml, 'w') as f:
            f.write(text.replace('<name>pci_%s</name>'
                                 % re.sub('[:.]', '_', VF),
                                 '<name>pci_0000_af_03_7</name>'))
        self.assertIsNone(self.stored_view())
        self.run_cli('pools')       # syncs
        self.assertEqual('pci_0000_af_03_7', self.devices()[VF]['dev_id'])
        self.assertIsNotNone(self.stored_view())

    def test_tables_that_disagree_are_refused_by_a_view_too(self):
        self.run_cli('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:1',
                     '--instance', INSTANCE)
        self.store_sql("UPDATE devices SET status = 'available', "
                       "instance_uuid = NULL WHERE instance_uuid = ?",
                       INSTANCE)
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--connection', 'test://' + self.host_xml,
                         '--config-file', self.conf, '--state-dir',
                         self.state, 'pools'], out=out, err=err)
        self.assertEqual(3, code)
        self.assertIn('tables disagree', err.getvalue())
        self.assertIn('which is available', err.getvalue())


class DigestTest(testtools.TestCase):

    def test_listing_order_does_not_matter(self):
        entries = [listing.Entry('b', '<device/>', None),
                   listing.Entry('a', "<capability type='mdev'/>", True),
                   listing.Entry(None, '<extra/>', None)]

        def digest(items):
            return listing.digest(items, hashlib.sha256()).hexdigest()

        self.assertEqual(digest(entries), digest(entries[::-1]))
        changed = [entries[0], entries[1]._replace(active=False), entries[2]]
        self.assertNotEqual(digest(entries), digest(changed))

    def test_may_be_mdev(self):
        self.assertTrue(listing.may_be_mdev("<capability type='mdev'>"))
        self.assertTrue(listing.may_be_mdev('<capability type="mdev">'))
        self.assertFalse(listing.may_be_mdev(
            "<capability type='mdev_types'>"))
        self.assertTrue(listing.may_be_mdev(b'bytes'))

    def test_code_version_names_records_and_package(self):
        self.assertEqual('%s/%s' % (
            synced.RECORDS_VERSION, importlib.metadata.version(
                'nova-pci-mdev')), synced.code_version())
