"""SqliteStore: round trips, transactions, schema version, two processes.

The tracker tests' host (see ``tests/unit/pci/test_manager.py``) is stored
and reloaded; a restart must give back exactly the same devices, statuses,
owners, parent/child links and pools.
"""

import multiprocessing
import os
import shutil
import sqlite3
import uuid as uuid_lib

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.store import files as store_files
from nova_pci_mdev.store import sqlite as store_lib
from nova_pci_mdev.tests.fixtures import tracker_world as world

objects.register_all()

S = world.S


class Boom(Exception):
    pass


def _claim_worker(path, ready, go, attempts):
    """One process: claim one nvidia-35 slot per instance, ``attempts`` times.

    Returns (via the queue) the (instance, addresses) it was given.
    """
    store = store_lib.SqliteStore(path)
    got = []
    ready.put(os.getpid())
    go.wait()
    for _ in range(attempts):
        instance = str(uuid_lib.uuid4())
        with store.transaction() as tx:
            tracker = manager.PciDevTracker(world.FakeWhitelist(),
                                            world.TOPOLOGY,
                                            tx.load_devices())
            try:
                devs = tracker.claim_instance(
                    instance, [world.request(vendor_id='10de',
                                             dev_type='mdev-vf')])
            except exception.PciDeviceRequestFailed:
                continue
            changed, deleted = tracker.pop_changes()
            tx.save_devices(changed)
            tx.delete_devices(deleted)
        got.append((instance, [d.address for d in devs]))
    store.close()
    return got


def _worker_main(path, ready, go, attempts, results):
    results.put(_claim_worker(path, ready, go, attempts))


def _many_slots(n):
    gpu = dict(vendor_id='10de', product_id='1eb8', numa_node=1)
    records = [world.record(world.GPU, 'mdev-pf', mdev_type='nvidia-35',
                            **gpu)]
    for i in range(n):
        records.append(world.record(
            '4b20d080-1b54-4048-85b3-%012x' % i, 'mdev-vf',
            parent_addr=world.GPU, mdev_type='nvidia-35', **gpu))
    return records


def _values(dev):
    """Every stored field; an unset nullable field reads as None."""
    return {name: getattr(dev, name) if name in dev else None
            for name, _sql in store_lib.DEVICE_COLUMNS}


class StoreTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state', 'nova-pci-mdev.sqlite')

    def open(self, **kwargs):
        store = store_lib.SqliteStore(self.path, **kwargs)
        self.addCleanup(store.close)
        return store

    def save_tracker(self, store, tracker):
        changed, deleted = tracker.pop_changes()
        with store.transaction() as tx:
            tx.save_devices(changed)
            tx.delete_devices(deleted)

    def busy_world(self, store):
        """The test host with claims, allocations and a missing device."""
        tracker = manager.PciDevTracker(world.FakeWhitelist(),
                                        world.TOPOLOGY)
        tracker.sync(world.world_records())
        tracker.claim_devices(world.INST_A, [world.VF1, world.SLOT3],
                              request_id=str(uuid_lib.uuid4()))
        tracker.allocate_instance(world.INST_A)
        tracker.claim_instance(world.INST_B,
                               [world.request(mdev_type='nvidia-35')])
        tracker.sync(world.without(world.world_records(), world.SLOT3,
                                   world.PCI))
        self.save_tracker(store, tracker)
        return tracker


class TestRoundTrip(StoreTestCase):

    def test_restart_reloads_the_same_state(self):
        store = self.open()
        tracker = self.busy_world(store)
        store.close()
        again_store = self.open()
        with again_store.transaction() as tx:
            loaded = tx.load_devices()
        again = manager.PciDevTracker(world.FakeWhitelist(), world.TOPOLOGY,
                                      loaded)
        self.assertEqual(world.snapshot(tracker), world.snapshot(again))
        self.assertEqual(([], []), again.pop_changes())
        self.assertNotIn(world.PCI, again.devices)
        self.assertTrue(device_table.is_missing(again.devices[world.SLOT3]))
        for address, dev in tracker.devices.items():
            self.assertEqual(_values(dev), _values(again.devices[address]),
                             address)
        # Pools too, pool by pool.
        self.assertEqual(
            [p.obj_to_primitive() for p in tracker.stats.to_pool_list()],
            [p.obj_to_primitive() for p in again.stats.to_pool_list()])

    def test_every_device_field_has_a_column(self):
        bookkeeping = {'created_at', 'updated_at', 'deleted_at', 'deleted'}
        self.assertEqual(
            set(pci_device.PciDevice.fields) - bookkeeping,
            {name for name, _sql in store_lib.DEVICE_COLUMNS})

    def test_delete_devices(self):
        store = self.open()
        tracker = self.busy_world(store)
        with store.transaction() as tx:
            tx.delete_devices([world.VF2, '0000:99:00.0'])
            self.assertEqual(len(tracker.devices) - 1,
                             len(tx.load_devices()))

    def test_instances(self):
        store = self.open()
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {'numa_cells': [1]})
            tx.save_instance(world.INST_B, {})
        with store.transaction() as tx:
            self.assertEqual({world.INST_A: {'numa_cells': [1]},
                              world.INST_B: {}}, tx.instances())
            tx.delete_instance(world.INST_B)
        with store.transaction() as tx:
            self.assertEqual([world.INST_A], list(tx.instances()))
            err = self.assertRaises(exception.StoreError, tx.save_instance,
                                    world.INST_B, object())
            self.assertIn('instance %s is not JSON' % world.INST_B, str(err))

    def test_no_documents_table(self):
        # Schema 1 had one that nothing used.
        self.open().close()
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual(
            ['devices', 'instances', 'schema_version', 'store_info'],
            sorted(r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")))


class TestTransactions(StoreTestCase):

    def test_exception_rolls_back_everything(self):
        store = self.open()
        tracker = self.busy_world(store)
        with store.transaction() as tx:
            before = {d.address: d.status for d in tx.load_devices()}

        def failing():
            with store.transaction() as tx:
                tracker.free_instance(world.INST_A)
                changed, deleted = tracker.pop_changes()
                tx.save_devices(changed)
                tx.delete_devices(deleted)
                tx.save_instance(world.INST_B, {})
                raise Boom()

        self.assertRaises(Boom, failing)
        with store.transaction() as tx:
            self.assertEqual(before,
                             {d.address: d.status for d in tx.load_devices()})
            self.assertNotIn(world.INST_B, tx.instances())

    def test_closed_transaction_and_nesting_refused(self):
        store = self.open()
        with store.transaction() as tx:
            err = self.assertRaises(exception.StoreError,
                                    store.transaction().__enter__)
            self.assertIn('do not nest', str(err))
        err = self.assertRaises(exception.StoreError, tx.load_devices)
        self.assertIn('already closed', str(err))
        self.assertIn(self.path, str(err))
        store.close()
        err = self.assertRaises(exception.StoreError,
                                store.transaction().__enter__)
        self.assertIn('closed', str(err))

    def test_writer_waits_then_times_out(self):
        first = self.open()
        second = self.open(busy_timeout=0.05)
        with first.transaction():
            err = self.assertRaises(exception.StoreError,
                                    second.transaction().__enter__)
            self.assertIn('locked', str(err))
            self.assertIn(self.path, str(err))
        with second.transaction() as tx:       # free again
            tx.save_instance(world.INST_A, {})

    def test_rollback_journal_durable_commits(self):
        # A WAL file could be lost on its own, taking commits with it.
        self.open()
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual('delete',
                         conn.execute('PRAGMA journal_mode').fetchone()[0])


class TestSchema(StoreTestCase):

    def _raw(self, *statements):
        conn = sqlite3.connect(self.path)
        with conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()

    def test_newer_schema_is_refused_and_left_alone(self):
        self.open().close()
        self._raw('UPDATE schema_version SET version = %d'
                  % (store_lib.SCHEMA_VERSION + 1))
        err = self.assertRaises(exception.StoreError,
                                store_lib.SqliteStore, self.path)
        self.assertIn(self.path, str(err))
        self.assertIn('schema version %d is newer'
                      % (store_lib.SCHEMA_VERSION + 1), str(err))
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual(store_lib.SCHEMA_VERSION + 1, conn.execute(
            'SELECT version FROM schema_version').fetchone()[0])

    def test_foreign_sqlite_file_is_refused(self):
        os.makedirs(os.path.dirname(self.path))
        self._raw('CREATE TABLE pci_devices (id INTEGER)')
        err = self.assertRaises(exception.StoreError,
                                store_lib.SqliteStore, self.path)
        self.assertIn('not a nova-pci-mdev state store', str(err))

    def test_unreadable_files_are_refused(self):
        # (what is at the path, expected text of the error)
        cases = [
            ('garbage', 'not an SQLite database'),
            ('directory', 'is not a regular file (a directory)'),
        ]
        for what, text in cases:
            path = os.path.join(self.dir, what)
            if what == 'directory':
                os.makedirs(path)
            else:
                with open(path, 'wb') as f:
                    f.write(b'not sqlite at all' * 100)
            err = self.assertRaises(exception.StoreError,
                                    store_lib.SqliteStore, path)
            self.assertIn(path, str(err))
            self.assertIn(text, str(err))

    def test_invalid_stored_device_names_the_device(self):
        store = self.open()
        self.busy_world(store)
        self._raw("UPDATE devices SET dev_type = 'type-XYZ' WHERE "
                  "address = '%s'" % world.VF2)
        with store.transaction() as tx:
            err = self.assertRaises(exception.StoreError, tx.load_devices)
        self.assertIn(world.VF2, str(err))
        self.assertIn('type-XYZ', str(err))


class TestTwoProcesses(StoreTestCase):

    def test_no_device_handed_to_two_instances(self):
        """Two spawned processes race for 6 slots, 8 attempts each."""
        store = self.open()
        tracker = manager.PciDevTracker(world.FakeWhitelist(),
                                        world.TOPOLOGY)
        tracker.sync(_many_slots(6))
        self.save_tracker(store, tracker)

        ctx = multiprocessing.get_context('spawn')
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_worker_main,
                             args=(self.path, ready, go, 8, results))
                 for _ in range(2)]
        for proc in procs:
            proc.start()
        self.addCleanup(lambda: [p.kill() for p in procs if p.is_alive()])
        for _ in procs:
            ready.get(timeout=60)
        go.set()
        got = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
            self.assertEqual(0, proc.exitcode)

        owner = {}
        for instance, addresses in got[0] + got[1]:
            self.assertEqual(1, len(addresses))
            for address in addresses:
                self.assertNotIn(address, owner)
                owner[address] = instance
        self.assertEqual(6, len(owner))
        with store.transaction() as tx:
            stored = {d.address: d for d in tx.load_devices()}
        for address, instance in owner.items():
            self.assertEqual((S.CLAIMED, instance),
                             (stored[address].status,
                              stored[address].instance_uuid))
        self.assertEqual(S.UNCLAIMABLE, stored[world.GPU].status)


class TestTablesAgree(StoreTestCase):
    """The devices and instances tables are cross-checked on every load
    (issue 31): a device row set back to available (or deleted) while an
    instance record still lists it was handed out again by the next
    claim."""

    def agreeing(self, store):
        """busy_world with the records its claims would have written."""
        tracker = self.busy_world(store)
        with store.transaction() as tx:
            for uuid in tracker.instances():
                tx.save_instance(uuid, {'devices': sorted(
                    d.address for d in tracker.devices_of(uuid))})
        return tracker

    def test_agreeing_tables_load(self):
        store = self.open()
        tracker = self.agreeing(store)
        with store.transaction() as tx:
            devices, instances, busy = tx.load_state()
        self.assertEqual(sorted(tracker.devices), sorted(
            d.address for d in devices))
        self.assertEqual({world.INST_A, world.INST_B}, set(instances))
        self.assertEqual(sorted(a for a, d in tracker.devices.items()
                                if d.status in ('claimed', 'allocated')),
                         sorted(d.address for d in busy))

    def test_every_disagreement_is_named_and_nothing_written(self):
        vf1 = world.VF1
        cases = (
            ("UPDATE devices SET status = 'available', instance_uuid = NULL "
             "WHERE address = '%s'" % vf1,
             'instance %s lists device %s, which is available'
             % (world.INST_A, vf1)),
            ("DELETE FROM devices WHERE address = '%s'" % vf1,
             'instance %s lists device %s, which is not in the devices '
             'table' % (world.INST_A, vf1)),
            ("UPDATE devices SET instance_uuid = '%s' WHERE address = '%s'"
             % (world.INST_B, vf1),
             'device %s is allocated by instance %s, but instance %s lists '
             'it' % (vf1, world.INST_B, world.INST_A)),
            ("DELETE FROM instances WHERE uuid = '%s'" % world.INST_A,
             'device %s is allocated by instance %s, which has no record'
             % (vf1, world.INST_A)),
            ("UPDATE instances SET data = '{\"devices\": []}' WHERE uuid = "
             "'%s'" % world.INST_A,
             'device %s is allocated by instance %s, whose record does not '
             'list it' % (vf1, world.INST_A)),
            ("UPDATE instances SET data = '{\"devices\": [\"%s\"]}' WHERE "
             "uuid = '%s'" % (vf1, world.INST_B),
             'device %s is listed by instances %s and %s'
             % (vf1, world.INST_A, world.INST_B)),
            ("UPDATE instances SET data = '{\"devices\": 7}' WHERE uuid = "
             "'%s'" % world.INST_B,
             'the record of instance %s lists 7, not device addresses'
             % world.INST_B),
        )
        for sql, text in cases:
            store = self.open()
            self.agreeing(store)
            store.close()
            conn = sqlite3.connect(self.path)
            conn.execute(sql)
            conn.commit()
            conn.close()
            store = self.open()
            generation = store_files.read_marker(self.path)['generation']
            with open(self.path, 'rb') as handle:
                before = handle.read()

            def load():
                with store.transaction() as tx:
                    tx.load_state()

            err = self.assertRaises(exception.StoreError, load)
            self.assertIn(self.path, str(err))
            self.assertIn('its devices and instances tables disagree: ',
                          str(err))
            self.assertIn(text, str(err))
            self.assertIn('Nothing was changed', str(err))
            with open(self.path, 'rb') as handle:
                self.assertEqual(before, handle.read())
            self.assertEqual(generation,
                             store_files.read_marker(self.path)['generation'])
            store.close()
            shutil.rmtree(os.path.dirname(self.path))
