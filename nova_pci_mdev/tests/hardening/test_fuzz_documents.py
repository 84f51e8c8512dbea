"""Fuzzing the documents the CLI reads from disk: the sidecar JSON of
``test://`` hosts, the emulated backend's ``mdevs.json`` and the rows of
``state.db``.

Property: the reader returns values that keep its module's invariants or
raises its own project exception naming the file; nothing else escapes.
"""

import html
import os
import sqlite3

import fixtures
from hypothesis import given
from hypothesis import strategies as st
import libvirt

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.store import sqlite as store_mod
from nova_pci_mdev.tests.fixtures import node_device_xml as fx
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import strategies as hs
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt.emulated import host as emulated
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated

UUID = fx.UUID
node_device_xml = fx.node_device_xml

#: JSON documents nest at most this deep here; deeper nesting (which the
#: json module answers with RecursionError) has its own test below.
MAX_NESTING = 400
encodable_json = hs.json_value(text=hs.encodable_text)


def _json_doc(strategy):
    return st.one_of(strategy.map(hs.dumps), encodable_json.map(hs.dumps),
                     st.integers(1, MAX_NESTING).map(
                         lambda n: '[' * n + ']' * n),
                     st.integers(1, MAX_NESTING).map(lambda n: '{"a":' * n),
                     hs.encodable_text)


sidecar_doc = st.fixed_dictionaries({}, optional={
    'hostname': hs.encodable_scalar,
    'cells': st.one_of(encodable_json, st.lists(st.fixed_dictionaries(
        {}, optional={k: hs.encodable_scalar | st.lists(
            hs.encodable_scalar, max_size=3)
            for k in ('id', 'socket', 'cpus', 'memory_kb', 'x')}),
        max_size=3)),
    'extra_node_devices': st.one_of(encodable_json, st.lists(
        node_device_xml, max_size=2)),
    '_comment': hs.encodable_scalar})


class DocumentFuzzTest(recorder.HardeningTestCase):
    """JSON and SQLite documents the CLI reads from disk."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_sidecar(self):
        with self.record('fuzz', 'host sidecar JSON (hostname, cells, '
                         'extra_node_devices; nesting up to 400 deep) '
                         '-> EmulatedHost', 'a Sidecar and a host, or '
                         'TopologySidecarInvalid / NodeDeviceXMLInvalid '
                         'naming the file or device') as row:
            conn = libvirt.open(data.sample_connection_uri())
            self.addCleanup(conn.close)
            path = os.path.join(self.tmp, 'host_topology.json')

            @recorder.examples(80, 3000)
            @given(_json_doc(sidecar_doc))
            def check(text):
                row.cases += 1
                with open(path, 'w', encoding='utf-8',
                          errors='surrogatepass') as handle:
                    handle.write(text)
                try:
                    sidecar = emulated.load_sidecar(path)
                except exception.TopologySidecarInvalid as exc:
                    self.assertIn(path, str(exc))
                    return
                try:
                    emulated.EmulatedHost(conn, os.path.join(self.tmp, 's'),
                                          sidecar)
                except exception.NodeDeviceXMLInvalid as exc:
                    # It names a device of the sidecar's list.
                    device = str(exc.kwargs['device'])
                    self.assertIn(device, str(exc))
                    self.assertTrue(
                        device == '<unnamed node device>' or any(
                            device in html.unescape(x)
                            for x in sidecar.extra_node_devices), exc)
                except exception.InvalidValue as exc:
                    self.assertIn(repr(exc.kwargs['value']), str(exc))

            check()

    def test_emulated_mdevs_file(self):
        with self.record('fuzz', 'emulated mdevs.json (corrupt, deep, '
                         'hostile names) -> EmulatedBackend.list',
                         '{uuid: MdevInfo} of valid names or StoreError '
                         'naming the file') as row:
            backend = mdev_emulated.EmulatedBackend(self.tmp, {})
            entry = st.fixed_dictionaries({}, optional={
                'parent': hs.encodable_scalar | st.just('0000:84:00.0'),
                'mdev_type': hs.encodable_scalar | st.just('nvidia-35')})
            doc = st.fixed_dictionaries({}, optional={
                'version': st.just(1) | hs.encodable_scalar,
                'mdevs': st.dictionaries(
                    hs.encodable_text | st.just(UUID),
                    entry | encodable_json, max_size=3) | encodable_json})

            @recorder.examples(80, 3000)
            @given(_json_doc(doc))
            def check(text):
                row.cases += 1
                with open(backend.path, 'w', encoding='utf-8',
                          errors='surrogatepass') as handle:
                    handle.write(text)
                try:
                    found = backend.list()
                except exception.StoreError as exc:
                    self.assertIn(backend.path, str(exc))
                    return
                for uuid, info in found.items():
                    self.assertEqual(uuid, names.normalize_uuid(uuid))
                    names.normalize_address(info.parent)
                    names.validate_mdev_type(info.mdev_type)

            check()

    def _raw(self, path, *statements):
        raw = sqlite3.connect(path)
        try:
            for statement in statements:
                raw.execute(*statement)
            raw.commit()
        finally:
            raw.close()

    def test_state_store_device_rows(self):
        with self.record('fuzz', 'state.db device rows with hostile column '
                         'values (Transaction.load_devices)',
                         'PciDevices or StoreError naming the file and '
                         'device') as row:
            path = os.path.join(self.tmp, 'state.db')
            store = store_mod.SqliteStore(path)
            self.addCleanup(store.close)
            value = st.one_of(st.none(), st.integers(-5, 2 ** 62),
                              hs.encodable_text, hs.number_text,
                              st.sampled_from(['mdev-vf', 'available',
                                               '10de', '{}', UUID]))
            columns = [c for c, _sql in store_mod.DEVICE_COLUMNS]
            not_null = ('uuid', 'vendor_id', 'product_id', 'dev_type',
                        'status', 'extra_info')

            @recorder.examples(60, 1000)
            @given(st.fixed_dictionaries({c: value for c in columns}),
                   _json_doc(encodable_json))
            def check(values, extra_info):
                row.cases += 1
                values['address'] = values['address'] or 'x'
                values['extra_info'] = extra_info
                self._raw(path, ('DELETE FROM devices',), (
                    'INSERT INTO devices (%s) VALUES (%s)' % (
                        ', '.join(columns), ', '.join('?' * len(columns))),
                    [values[c] if values[c] is not None or c not in not_null
                     else '' for c in columns]))
                try:
                    with store.transaction() as tx:
                        tx.load_devices()
                except exception.StoreError as exc:
                    self.assertIn(path, str(exc))

            check()

    def test_state_store_instance_documents(self):
        with self.record('fuzz', 'state.db instance documents that are not '
                         'the JSON we wrote (Transaction.instances)',
                         'documents or StoreError naming the file') as row:
            path = os.path.join(self.tmp, 'state.db')
            store = store_mod.SqliteStore(path)
            self.addCleanup(store.close)

            @recorder.examples(60, 1500)
            @given(_json_doc(encodable_json))
            def check(document):
                row.cases += 1
                self._raw(path, ('DELETE FROM instances',), (
                    'INSERT INTO instances (uuid, data) VALUES (?, ?)',
                    (UUID, document)))
                try:
                    with store.transaction() as tx:
                        tx.instances()
                except exception.StoreError as exc:
                    self.assertIn(path, str(exc))

            check()

    def test_deeply_nested_json(self):
        # The json module answers nesting beyond the interpreter's
        # recursion limit with RecursionError, which is no ValueError.
        with self.record('fuzz', 'JSON nested 100,000 deep in the sidecar, '
                         'mdevs.json and state.db (regression)',
                         'TopologySidecarInvalid / StoreError naming the '
                         'file') as row:
            deep = '[' * 100000
            sidecar = os.path.join(self.tmp, 'host_topology.json')
            with open(sidecar, 'w') as handle:
                handle.write(deep)
            row.cases += 1
            self.assertRaises(exception.TopologySidecarInvalid,
                              emulated.load_sidecar, sidecar)
            row.cases += 1
            self.assertRaises(exception.TopologySidecarInvalid,
                              capabilities.load_topology_sidecar, sidecar)
            backend = mdev_emulated.EmulatedBackend(
                os.path.join(self.tmp, 'e'), {})
            with open(backend.path, 'w') as handle:
                handle.write(deep)
            row.cases += 1
            self.assertRaises(exception.StoreError, backend.list)
            path = os.path.join(self.tmp, 'state.db')
            store = store_mod.SqliteStore(path)
            self.addCleanup(store.close)
            raw = sqlite3.connect(path)
            raw.execute("INSERT INTO devices (address, uuid, vendor_id, "
                        "product_id, dev_type, status, extra_info) VALUES "
                        "('0000:84:00.0', ?, '10de', '1eb8', 'type-PCI', "
                        "'available', ?)", (UUID, deep))
            raw.execute('INSERT INTO instances (uuid, data) VALUES (?, ?)',
                        (UUID, deep))
            raw.commit()
            raw.close()
            for read in ('load_devices', 'instances'):
                row.cases += 1
                with store.transaction() as tx:
                    self.assertRaises(exception.StoreError,
                                      getattr(tx, read))

    def test_stored_number_that_is_infinite(self):
        # Regression for the full run's finding: SQLite turns the text
        # '1e999' in an INTEGER column into the REAL infinity, and
        # int(inf) raises OverflowError.
        with self.record('fuzz', "state.db device row with numa_node "
                         "'1e999' (regression)", 'StoreError naming the '
                         'file and device') as row:
            row.cases += 1
            path = os.path.join(self.tmp, 'state.db')
            store = store_mod.SqliteStore(path)
            self.addCleanup(store.close)
            self._raw(path, (
                "INSERT INTO devices (address, uuid, vendor_id, product_id, "
                "dev_type, status, extra_info, numa_node) VALUES "
                "('0000:84:00.0', ?, '10de', '1eb8', 'type-PCI', "
                "'available', '{}', '1e999')", (UUID,)))
            with store.transaction() as tx:
                exc = self.assertRaises(exception.StoreError,
                                        tx.load_devices)
            self.assertIn('0000:84:00.0', str(exc))
