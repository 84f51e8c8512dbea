"""Persistent state of one compute host: a SQLite file.

The tracker keeps its devices here between runs, and other modules keep
small JSON documents (instances, mdev bookkeeping) next to them, so that
one transaction covers a claim and everything recorded with it::

    with store.transaction() as tx:
        tracker = PciDevTracker(whitelist, topology, tx.load_devices())
        tracker.claim_instance(uuid, requests)
        changed, deleted = tracker.pop_changes()
        tx.save_devices(changed)
        tx.delete_devices(deleted)

Invariants:

* One writer at a time, across processes: every transaction starts with
  ``BEGIN IMMEDIATE``, so a process that reads the devices, claims and
  writes back cannot interleave with another process doing the same; the
  second one waits (up to ``busy_timeout`` seconds) for the first to
  commit and then reads its result. Two processes therefore never hand
  the same device to two instances.
* A transaction commits only when its block ends normally; any exception
  rolls back everything written in it, and a closed transaction refuses
  further use.
* The file carries a ``schema_version``; a file of a newer schema, or a
  SQLite file that is not a store, is refused and never altered.
* Devices round-trip exactly: every :class:`PciDevice` field except the
  bookkeeping timestamps has a column of its own (``extra_info`` as JSON).
  Explicit columns rather than ``obj_to_primitive`` blobs, because the
  schema is then versioned here (``schema_version``) instead of by the
  object envelope, loading goes through the fields' validation, and an
  operator can read the state with the ``sqlite3`` shell
  (``SELECT address, status, instance_uuid FROM devices``).
* Every ``sqlite3`` or filesystem error surfaces as
  :class:`~nova_pci_mdev.exception.StoreError` naming the file.
"""

import contextlib
import json
import os
import sqlite3

from nova_pci_mdev import exception
from nova_pci_mdev.objects import pci_device

SCHEMA_VERSION = 1
DEFAULT_BUSY_TIMEOUT = 10.0

#: (column, SQL type) of the devices table, one per PciDevice field.
DEVICE_COLUMNS = (
    ('address', 'TEXT PRIMARY KEY'),
    ('uuid', 'TEXT NOT NULL'),
    ('id', 'INTEGER'),
    ('compute_node_id', 'INTEGER'),
    ('vendor_id', 'TEXT NOT NULL'),
    ('product_id', 'TEXT NOT NULL'),
    ('dev_type', 'TEXT NOT NULL'),
    ('status', 'TEXT NOT NULL'),
    ('dev_id', 'TEXT'),
    ('label', 'TEXT'),
    ('instance_uuid', 'TEXT'),
    ('request_id', 'TEXT'),
    ('extra_info', "TEXT NOT NULL DEFAULT '{}'"),
    ('numa_node', 'INTEGER'),
    ('parent_addr', 'TEXT'),
    ('mdev_type', 'TEXT'),
)
_COLUMN_NAMES = tuple(name for name, _sql in DEVICE_COLUMNS)

_SCHEMA = (
    'CREATE TABLE schema_version (version INTEGER NOT NULL)',
    'CREATE TABLE devices (%s)' % ', '.join(
        '%s %s' % column for column in DEVICE_COLUMNS),
    'CREATE INDEX devices_instance ON devices (instance_uuid)',
    'CREATE TABLE instances (uuid TEXT PRIMARY KEY, data TEXT NOT NULL)',
    'CREATE TABLE documents (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
)


class SqliteStore(object):
    """The state store in the SQLite file ``path`` (created if missing).

    ``busy_timeout`` is how long (seconds) a transaction waits for another
    process's transaction to finish before failing with StoreError.
    """

    def __init__(self, path, busy_timeout=DEFAULT_BUSY_TIMEOUT):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._conn = None
        self._tx = None
        with self._errors('open'):
            directory = os.path.dirname(os.path.abspath(self.path))
            if self.path != ':memory:':
                os.makedirs(directory, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None)
            self._conn.execute('PRAGMA journal_mode=WAL').fetchone()
        try:
            # Checking an existing, current schema is a read: it must not
            # queue behind (or hold up) writers for the write lock.
            with self.transaction(immediate=False) as tx:
                ready = tx._prepare_schema(create=False)
            if not ready:
                with self.transaction() as tx:
                    tx._prepare_schema()
        except BaseException:
            self.close()
            raise

    def close(self):
        """Close the connection (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _error(self, reason):
        return exception.StoreError(path=self.path, reason=reason)

    @contextlib.contextmanager
    def _errors(self, action):
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise self._error('%s failed: %s' % (action, exc)) from exc

    @contextlib.contextmanager
    def transaction(self, immediate=True):
        """A :class:`Transaction`: BEGIN IMMEDIATE, COMMIT or ROLLBACK.

        ``immediate=False`` begins a deferred transaction, for reads: it
        takes no write lock until its first write.
        """
        if self._conn is None:
            raise self._error('the store is closed')
        if self._tx is not None:
            raise self._error('a transaction is already open on this '
                              'store (transactions do not nest)')
        with self._errors('begin transaction (waited up to %ss for other '
                          'writers)' % self.busy_timeout):
            self._conn.execute('BEGIN IMMEDIATE' if immediate else 'BEGIN')
        tx = self._tx = Transaction(self, self._conn)
        try:
            yield tx
        except BaseException:
            self._close_tx(tx)
            try:
                self._conn.execute('ROLLBACK')
            except sqlite3.Error:
                pass    # the original error is the one worth reporting
            raise
        self._close_tx(tx)
        try:
            with self._errors('commit'):
                self._conn.execute('COMMIT')
        except exception.StoreError:
            try:
                self._conn.execute('ROLLBACK')
            except sqlite3.Error:
                pass
            raise

    def _close_tx(self, tx):
        tx._open = False
        self._tx = None


class Transaction(object):
    """What may be done inside :meth:`SqliteStore.transaction`."""

    def __init__(self, store, conn):
        self._store = store
        self._conn = conn
        self._open = True

    @contextlib.contextmanager
    def _sql(self, action):
        if not self._open:
            raise self._store._error(
                '%s: the transaction is already closed' % action)
        with self._store._errors(action):
            yield self._conn

    # -- schema ------------------------------------------------------------

    def _prepare_schema(self, create=True):
        """Check the schema; create it in an empty database when
        ``create`` (the transaction must then hold the write lock). False
        when the database is empty and ``create`` is False, else True."""
        with self._sql('read schema') as conn:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                if not create:
                    return False
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute('INSERT INTO schema_version (version) '
                             'VALUES (?)', (SCHEMA_VERSION,))
                return True
            if 'schema_version' not in tables:
                raise self._store._error(
                    'not a nova-pci-mdev state store (no schema_version '
                    'table; tables: %s)' % ', '.join(sorted(tables)))
            row = conn.execute(
                'SELECT MAX(version) FROM schema_version').fetchone()
        version = row[0] if row else None
        if not isinstance(version, int):
            raise self._store._error(
                'schema_version holds %r, expected an integer' % (version,))
        if version > SCHEMA_VERSION:
            raise self._store._error(
                'schema version %d is newer than this nova-pci-mdev '
                'understands (%d); use the newer release or another state '
                'directory' % (version, SCHEMA_VERSION))
        # Older versions would be migrated here; 1 is the first.
        return True

    # -- devices -----------------------------------------------------------

    def load_devices(self):
        """Every stored device as a :class:`PciDevice` (by address)."""
        with self._sql('load devices') as conn:
            rows = conn.execute('SELECT %s FROM devices ORDER BY address'
                                % ', '.join(_COLUMN_NAMES)).fetchall()
        field_defs = pci_device.PciDevice.fields
        devices = []
        for row in rows:
            values = dict(zip(_COLUMN_NAMES, row))
            try:
                values['extra_info'] = json.loads(values['extra_info'])
                kwargs = {name: value for name, value in values.items()
                          if value is not None or field_defs[name].nullable}
                dev = pci_device.PciDevice(**kwargs)
            except (exception.NovaPciMdevException, ValueError,
                    TypeError, OverflowError, RecursionError) as exc:
                raise self._store._error('stored device %s is invalid: %s'
                                         % (values['address'], exc))
            dev.obj_reset_changes()
            devices.append(dev)
        return devices

    def save_devices(self, devices):
        """Insert or replace the rows of ``devices`` (by address)."""
        rows = []
        for dev in devices:
            row = []
            for name in _COLUMN_NAMES:
                value = getattr(dev, name) if name in dev else None
                if name == 'extra_info':
                    value = json.dumps(value or {}, sort_keys=True)
                row.append(value)
            rows.append(row)
        with self._sql('save devices') as conn:
            conn.executemany(
                'INSERT OR REPLACE INTO devices (%s) VALUES (%s)' % (
                    ', '.join(_COLUMN_NAMES),
                    ', '.join('?' * len(_COLUMN_NAMES))), rows)

    def delete_devices(self, addresses):
        """Delete the rows of ``addresses`` (unknown ones are ignored)."""
        with self._sql('delete devices') as conn:
            conn.executemany('DELETE FROM devices WHERE address = ?',
                             [(address,) for address in addresses])

    # -- instances ---------------------------------------------------------

    def instances(self):
        """dict instance uuid -> its stored JSON document."""
        with self._sql('load instances') as conn:
            rows = conn.execute(
                'SELECT uuid, data FROM instances ORDER BY uuid').fetchall()
        return {uuid: self._loads('instance %s' % uuid, data)
                for uuid, data in rows}

    def save_instance(self, instance_uuid, data):
        text = self._dumps('instance %s' % instance_uuid, data)
        with self._sql('save instance %s' % instance_uuid) as conn:
            conn.execute('INSERT OR REPLACE INTO instances (uuid, data) '
                         'VALUES (?, ?)', (instance_uuid, text))

    def delete_instance(self, instance_uuid):
        with self._sql('delete instance %s' % instance_uuid) as conn:
            conn.execute('DELETE FROM instances WHERE uuid = ?',
                         (instance_uuid,))

    # -- small JSON documents ------------------------------------------------

    def get(self, key, default=None):
        with self._sql('read %s' % key) as conn:
            row = conn.execute('SELECT value FROM documents WHERE key = ?',
                               (key,)).fetchone()
        return default if row is None else self._loads(key, row[0])

    def put(self, key, value):
        text = self._dumps(key, value)
        with self._sql('write %s' % key) as conn:
            conn.execute('INSERT OR REPLACE INTO documents (key, value) '
                         'VALUES (?, ?)', (key, text))

    def delete(self, key):
        with self._sql('delete %s' % key) as conn:
            conn.execute('DELETE FROM documents WHERE key = ?', (key,))

    def _loads(self, what, text):
        try:
            return json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise self._store._error('stored %s is not valid JSON: %s'
                                     % (what, exc)) from None

    def _dumps(self, what, value):
        try:
            return json.dumps(value, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise self._store._error('%s is not JSON: %s' % (what, exc))
