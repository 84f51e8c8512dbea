"""The store knows what it is (issue 15, items 2, 3, 6 and 8).

A truncated, missing or replaced database beside existing state is
corruption, never a fresh start; a store of another host is refused; a
commit to a file that was deleted is an error; a foreign SQLite file or a
symbolic link is refused without a byte written.
"""

import contextlib
import hashlib
import os
import shutil
import sqlite3

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.store import files as store_files
from nova_pci_mdev.store import sqlite as store_lib
from nova_pci_mdev.tests.fixtures import statedir
from nova_pci_mdev.tests.fixtures import tracker_world as world

OWNER = {'connection': 'qemu:///system', 'compute_node': 'cn1'}


def digest(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def listing(directory):
    return sorted(os.listdir(directory))


class IdentityTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'state')
        self.path = os.path.join(self.dir, 'state.db')
        self.beside = os.path.join(self.dir, 'mdevs.json')

    def open(self, path=None, **kwargs):
        store = store_lib.SqliteStore(path or self.path, **kwargs)
        self.addCleanup(store.close)
        return store

    def with_claim(self, **kwargs):
        """A store holding one instance record; closed again."""
        store = self.open(**kwargs)
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {'devices': [world.SLOT1]})
        store.close()

    def assertRefused(self, text, path=None, **kwargs):
        err = self.assertRaises(exception.StoreError, store_lib.SqliteStore,
                                path or self.path, **kwargs)
        self.assertIn(path or self.path, str(err))
        self.assertIn(text, str(err))
        return err


class TestNewStore(IdentityTestCase):

    def test_it_records_schema_owner_identity_and_marker(self):
        store = self.open(owner=OWNER)
        with open(self.path, 'rb') as handle:
            header = handle.read(100)
        self.assertEqual(store_files.APPLICATION_ID,
                         int.from_bytes(header[68:72], 'big'))
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        info = dict(conn.execute('SELECT key, value FROM store_info'))
        # Generation 1: the commit that says its marker is published
        # (from now on the marker must be there).
        self.assertEqual({'format': 'nova-pci-mdev state store',
                          'store': store.store_uuid, 'generation': '1',
                          'owner.connection': 'qemu:///system',
                          'owner.compute_node': 'cn1'}, info)
        self.assertEqual({'store': store.store_uuid, 'generation': 1},
                         store_files.read_marker(self.path))
        self.assertEqual(['state.db', 'state.db.id', 'state.db.lock'],
                         listing(self.dir))

    def test_generation_counts_commits_that_wrote(self):
        store = self.open()
        with store.transaction() as tx:
            tx.load_devices()
        self.assertEqual(1, store_files.read_marker(self.path)['generation'])
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {})
        with store.transaction() as tx:
            tx.save_devices([])
        self.assertEqual(2, store_files.read_marker(self.path)['generation'])


class TestLostStore(IdentityTestCase):
    """Items 2 and 3: truncated or deleted, beside existing state."""

    def test_truncated_to_zero_bytes_is_refused(self):
        self.with_claim()
        open(self.path, 'w').close()
        self.assertRefused('is empty (0 bytes) but the state directory has '
                           'state of an earlier store (state.db.id)')
        self.assertEqual(0, os.path.getsize(self.path))

    def test_deleted_database_is_refused(self):
        self.with_claim()
        os.unlink(self.path)
        self.assertRefused('is missing but the state directory has state')
        self.assertFalse(os.path.exists(self.path))

    def test_deleted_database_and_marker_beside_emulated_mdevs(self):
        self.with_claim(beside=[self.beside])
        with open(self.beside, 'w') as handle:
            handle.write('{}')
        os.unlink(self.path)
        os.unlink(store_files.marker_path(self.path))
        self.assertRefused('(mdevs.json)', beside=[self.beside])
        self.assertFalse(os.path.exists(self.path))

    def test_empty_file_alone_is_not_ours(self):
        os.makedirs(self.dir)
        open(self.path, 'w').close()
        self.assertRefused('not a store this program wrote')
        self.assertEqual(['state.db', 'state.db.lock'], listing(self.dir))

    def test_first_start_in_an_empty_directory(self):
        os.makedirs(self.dir)
        self.open(beside=[self.beside])
        self.assertTrue(os.path.exists(self.path))

    def test_database_deleted_during_a_transaction(self):
        store = self.open()
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {})

        def claim():
            with store.transaction() as tx:
                tx.save_instance(world.INST_B, {})
                os.unlink(self.path)

        err = self.assertRaises(exception.StoreError, claim)
        self.assertIn('nothing was committed', str(err))
        self.assertRefused('is missing')

    def test_directory_deleted_during_a_transaction(self):
        store = self.open()

        def claim():
            with store.transaction() as tx:
                tx.save_instance(world.INST_B, {})
                shutil.rmtree(self.dir)

        err = self.assertRaises(exception.StoreError, claim)
        self.assertIn('deleted or replaced', str(err))
        self.assertFalse(os.path.exists(self.dir))
        # And the next transaction of the same process does not write
        # into the void either.
        self.assertRaises(exception.StoreError,
                          store.transaction().__enter__)
        self.assertFalse(os.path.exists(self.dir))

    def test_read_only_directory_commit_is_an_error(self):
        store = self.open()
        self.useFixture(statedir.ReadOnlyDir(self.dir))

        def claim():
            with store.transaction() as tx:
                tx.save_instance(world.INST_B, {})

        err = self.assertRaises(exception.StoreError, claim)
        self.assertIn(self.path, str(err))
        with store.transaction() as tx:
            self.assertEqual({}, tx.instances())


class TestReplacedStore(IdentityTestCase):

    def test_another_store_is_refused(self):
        self.with_claim()
        other = os.path.join(self.dir + '2', 'state.db')
        self.open(other).close()
        shutil.copy(other, self.path)
        before = digest(self.path)
        self.assertRefused('the database was replaced by another store')
        self.assertEqual(before, digest(self.path))

    def test_an_older_copy_is_refused(self):
        store = self.open()
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {})
        store.close()
        old = self.path + '.bak'
        shutil.copy(self.path, old)
        store = self.open()
        with store.transaction() as tx:
            tx.save_instance(world.INST_B, {})
        store.close()
        os.replace(old, self.path)
        self.assertRefused('an older copy replaced it')

    def test_a_lost_marker_is_refused(self):
        # Accepted before (issue 31): delete the marker with the newer
        # database replaced by an older copy, and the older copy was taken
        # as the store, handing out again what guests hold.
        store = self.open()
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {'devices': []})
        store.close()
        old = self.path + '.bak'
        shutil.copy(self.path, old)
        store = self.open()
        uuid = store.store_uuid
        with store.transaction() as tx:
            tx.save_instance(world.INST_B, {'devices': []})
        store.close()
        marker = store_files.marker_path(self.path)
        for database, generation in ((self.path, 3), (old, 2)):
            shutil.copy(database, self.path + '.try')
            os.replace(self.path + '.try', self.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(marker)
            before = digest(self.path)
            err = self.assertRefused('is store %s at generation %d, but its '
                                     'marker %s is missing'
                                     % (uuid, generation, marker))
            self.assertEqual(before, digest(self.path))
            self.assertFalse(os.path.exists(marker))
            self.assertIn('write {"store": "%s", "generation": %d}'
                          % (uuid, generation), str(err))

    def test_the_named_marker_lets_the_current_database_in(self):
        store = self.open()
        uuid = store.store_uuid
        with store.transaction() as tx:
            tx.save_instance(world.INST_A, {'devices': []})
        store.close()
        marker = store_files.marker_path(self.path)
        os.unlink(marker)
        err = self.assertRefused('is missing')
        self.assertIn('{"store": "%s", "generation": 2}' % uuid, str(err))
        with open(marker, 'w') as handle:
            handle.write('{"store": "%s", "generation": 2}' % uuid)
        self.assertEqual(uuid, self.open().store_uuid)

    def test_a_crash_between_database_and_marker(self):
        """The windows of a first start (and of a migration): a store
        whose marker was never published opens, the marker is written;
        a new one beside earlier state does not."""
        store = self.open()
        store.close()
        conn = sqlite3.connect(self.path)
        conn.execute("INSERT INTO store_info VALUES ('marker_pending', '1')")
        conn.execute("UPDATE store_info SET value = '0' "
                     "WHERE key = 'generation'")
        conn.commit()
        conn.close()
        crashed = self.path + '.crashed'
        shutil.copy(self.path, crashed)
        marker = store_files.marker_path(self.path)
        os.unlink(marker)
        with open(self.beside, 'w') as handle:
            handle.write('{}')
        self.assertRefused('has no marker but the state directory has state '
                           'of an earlier store (mdevs.json)',
                           beside=[self.beside])
        self.assertFalse(os.path.exists(marker))
        os.unlink(self.beside)
        uuid = self.open(beside=[self.beside]).store_uuid
        self.assertEqual({'store': uuid, 'generation': 1},
                         store_files.read_marker(self.path))
        # Published now: without the marker it is refused.
        os.unlink(marker)
        self.assertRefused('is missing')

    def test_garbage_marker_is_refused(self):
        self.open().close()
        with open(store_files.marker_path(self.path), 'w') as handle:
            handle.write('not json')
        err = self.assertRaises(exception.StoreError, store_lib.SqliteStore,
                                self.path)
        self.assertIn('state.db.id', str(err))


class TestOwner(IdentityTestCase):
    """Item 6: one state directory, one host."""

    def test_store_of_another_host_is_refused(self):
        self.with_claim(owner=OWNER)
        other = dict(OWNER, connection='test:///other.xml')
        err = self.assertRefused('belongs to connection qemu:///system, not '
                                 'to connection test:///other.xml',
                                 owner=other)
        self.assertIn('its own state directory', str(err))
        self.assertRefused('compute node cn1, not to compute node cn2',
                           owner=dict(OWNER, compute_node='cn2'))

    def test_owner_is_recorded_on_first_use(self):
        self.with_claim()
        self.open(owner=OWNER).close()
        self.assertRefused('belongs to', owner=dict(OWNER, compute_node='x'))


class TestNotOurs(IdentityTestCase):
    """Item 8: nothing written before recognition; no links followed."""

    def foreign(self, journal_mode):
        os.makedirs(self.dir, exist_ok=True)
        conn = sqlite3.connect(self.path)
        conn.execute('PRAGMA journal_mode=%s' % journal_mode)
        conn.execute('CREATE TABLE pci_devices (id INTEGER)')
        conn.commit()
        conn.close()

    def test_foreign_sqlite_file_is_not_altered(self):
        for mode in ('delete', 'wal'):
            self.foreign(mode)
            before = digest(self.path)
            self.assertRefused('not a nova-pci-mdev state store')
            self.assertEqual(before, digest(self.path), mode)
            os.unlink(self.path)

    def test_sqlite_file_of_another_application(self):
        self.foreign('delete')
        conn = sqlite3.connect(self.path)
        conn.execute('PRAGMA application_id = 1234')
        conn.commit()
        conn.close()
        before = digest(self.path)
        self.assertRefused('another application (application_id '
                           '0x000004d2)')
        self.assertEqual(before, digest(self.path))

    def test_symlinked_database_is_refused(self):
        target = os.path.join(self.dir + '-real', 'state.db')
        self.open(target).close()
        before = digest(target)
        os.makedirs(self.dir)
        os.symlink(target, self.path)
        self.assertRefused('is a symbolic link (to %s)' % target)
        self.assertEqual(before, digest(target))

    def test_symlinked_journal_marker_and_lock_are_refused(self):
        self.open().close()
        decoy = os.path.join(os.path.dirname(self.dir), 'decoy')
        with open(decoy, 'w') as handle:
            handle.write('keep')
        for name in ('state.db-journal', 'state.db.id', 'state.db.lock'):
            link = os.path.join(self.dir, name)
            saved = link + '.saved'
            if os.path.exists(link):
                os.rename(link, saved)
            os.symlink(decoy, link)
            err = self.assertRaises(exception.StoreError,
                                    store_lib.SqliteStore, self.path)
            self.assertIn('%s: is a symbolic link' % link, str(err))
            os.unlink(link)
            if os.path.exists(saved):
                os.rename(saved, link)
        with open(decoy) as handle:
            self.assertEqual('keep', handle.read())
        self.open()


class TestSchemaOne(IdentityTestCase):
    """Stores of the previous release are migrated, not refused."""

    def test_schema_1_store_is_migrated(self):
        os.makedirs(self.dir)
        conn = sqlite3.connect(self.path)
        conn.execute('PRAGMA journal_mode=WAL')
        for statement in (
                'CREATE TABLE schema_version (version INTEGER NOT NULL)',
                'CREATE TABLE devices (%s)' % ', '.join(
                    '%s %s' % c for c in store_lib.DEVICE_COLUMNS),
                'CREATE INDEX devices_instance ON devices (instance_uuid)',
                'CREATE TABLE instances (uuid TEXT PRIMARY KEY, data TEXT '
                'NOT NULL)',
                'CREATE TABLE documents (key TEXT PRIMARY KEY, value TEXT '
                'NOT NULL)',
                'INSERT INTO schema_version VALUES (1)'):
            conn.execute(statement)
        conn.execute('INSERT INTO instances VALUES (?, ?)',
                     (world.INST_A, '{"devices": []}'))
        conn.commit()
        conn.close()
        store = self.open(owner=OWNER)
        with store.transaction() as tx:
            self.assertEqual({world.INST_A: {'devices': []}},
                             tx.instances())
        store.close()
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual(2, conn.execute(
            'SELECT version FROM schema_version').fetchone()[0])
        self.assertEqual('delete', conn.execute(
            'PRAGMA journal_mode').fetchone()[0])
        self.assertEqual(store_files.APPLICATION_ID, conn.execute(
            'PRAGMA application_id').fetchone()[0])
        self.assertNotIn('documents', {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")})
        self.assertEqual('cn1', dict(conn.execute(
            'SELECT key, value FROM store_info'))['owner.compute_node'])
