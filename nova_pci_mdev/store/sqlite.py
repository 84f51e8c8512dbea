"""Persistent state of one compute host: a SQLite file that knows what it is.

The tracker keeps its devices here between runs, next to the instance
records, so that one transaction covers a claim and everything recorded
with it::

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
* The store knows what it is (:mod:`.store.files` for the files): the
  SQLite header carries our ``application_id``; ``store_info`` holds the
  format, the store's UUID, a generation counted up by every commit that
  wrote, and the ``owner`` (connection, compute node) it belongs to; the
  marker file ``<path>.id`` beside it repeats the UUID and the last
  generation. Opening refuses, with StoreError naming the file and
  changing nothing:

  - a file that is not SQLite, the SQLite file of another application, a
    SQLite file without our tables, a newer schema, a symbolic link;
  - a missing or empty database beside existing state (the marker,
    SQLite's journals, or the caller's ``beside`` files such as emulated
    mdevs): state was lost, which is never taken for a first start;
  - a database that is not the store the marker names, or an older
    generation of it (replaced by another store or an older copy);
  - a database without its marker, unless the marker was never published
    (a crash between creating the store and writing its marker: see
    :func:`.store.schema.check_identity`), and then only where a new
    store could be made;
  - a store whose recorded owner differs from ``owner``.

  A store of schema 1 (no identity yet) is recognised by its tables and
  migrated in place; its unused ``documents`` table is dropped.
* Nothing is written to a file before it is recognised as ours; a new
  store is built in a temporary file and linked into place complete.
* A commit is durable or an error: ``synchronous=FULL`` with a rollback
  journal, and a commit that wrote is checked against the file at
  ``path`` before and after COMMIT; if the file was deleted or replaced
  meanwhile, StoreError says that nothing (before) or that the commit
  (after) was lost, instead of reporting success.
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
import os
import sqlite3
import tempfile
import urllib.parse

from nova_pci_mdev import exception
from nova_pci_mdev.store import files
from nova_pci_mdev.store import rows
from nova_pci_mdev.store import schema

SCHEMA_VERSION = schema.SCHEMA_VERSION
DEVICE_COLUMNS = schema.DEVICE_COLUMNS
DEFAULT_BUSY_TIMEOUT = 10.0
SYNC_NOTE = rows.SYNC_NOTE


class SqliteStore(object):
    """The state store in the SQLite file ``path`` (created if missing).

    ``busy_timeout`` is how long (seconds) a transaction waits for another
    process's transaction to finish before failing with StoreError.
    ``owner`` (``{'connection': uri, 'compute_node': name}``, any str keys)
    is recorded in a new store and must match the one recorded in an
    existing store. ``beside`` are paths of the caller's own state files
    (e.g. emulated mdevs): their presence proves that the directory had a
    store. The directory of ``path`` is created if missing.
    """

    def __init__(self, path, busy_timeout=DEFAULT_BUSY_TIMEOUT, owner=None,
                 beside=()):
        self.path = os.path.abspath(str(path))
        self.busy_timeout = busy_timeout
        self.owner = {str(k): str(v) for k, v in dict(owner or {}).items()}
        self.store_uuid = None
        self._beside = tuple(beside)
        self._conn = None
        self._tx = None
        self._ident = None
        try:
            self._open()
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

    def error(self, reason):
        return exception.StoreError(path=self.path, reason=reason)

    @contextlib.contextmanager
    def errors(self, action):
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            moved = (self._ident is not None
                     and not files.same_file(self.path, self._ident))
            raise self.error('%s failed: %s%s' % (
                action, exc, ' (the state file was deleted or replaced '
                'since this process opened it; nothing was committed)'
                if moved else '')) from exc

    # -- opening -----------------------------------------------------------

    def _open(self):
        directory = os.path.dirname(self.path)
        with files.os_errors(directory, 'create the state directory'):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        with files.locked(self.path):
            kind = files.classify(self.path)
            if kind is files.Kind.UNMARKED_SQLITE:
                self._check_unmarked()
            marker = files.read_marker(self.path)
            if kind in (files.Kind.ABSENT, files.Kind.EMPTY):
                self._refuse_lost(kind)
                self._create()
                marker = files.read_marker(self.path)
            for suffix in files.SQLITE_SUFFIXES:
                files.lstat_state_file(self.path + suffix)
            ident = files.file_ident(self.path)
            with self.errors('open'):
                self._conn = sqlite3.connect(
                    self.path, timeout=self.busy_timeout,
                    isolation_level=None)
                self._conn.execute('PRAGMA synchronous=FULL')
            self._ident = ident
            info = self._read_info()
            if files.file_ident(self.path) != ident:
                raise self.error('replaced by another file while it was '
                                 'being opened')
            self.store_uuid = schema.check_identity(
                info, marker, files.marker_path(self.path), self.error)
            if (marker is None and kind is files.Kind.OURS
                    and info['generation'] == '0'):
                # A new store a crash left without its marker: only where
                # a new store could be made (:meth:`_refuse_lost`).
                self._refuse_lost(files.Kind.ABSENT, 'has no marker')
            missing = schema.check_owner(info, self.owner, self.error)
            if missing:
                with self.transaction() as tx:
                    with tx.sql('record the owner') as conn:
                        schema.put_info(conn, missing)
                info = self._read_info()
            current = {'store': self.store_uuid,
                       'generation': int(info['generation'])}
            if marker != current:
                files.write_marker(self.path, self.store_uuid,
                                   current['generation'])
            if info.get(schema.PENDING):
                with self.transaction() as tx:
                    with tx.sql('publish the marker') as conn:
                        schema.clear_pending(conn)

    def _check_unmarked(self):
        """A SQLite file without our application_id: a schema 1 store
        (read-only look at its tables) or refused."""
        uri = 'file:%s?mode=ro' % urllib.parse.quote(self.path)
        with self.errors('read schema'):
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout)
            try:
                is_1, found = schema.looks_like_schema_1(conn)
            finally:
                conn.close()
        if not is_1:
            raise self.error(
                'not a nova-pci-mdev state store (a SQLite file without '
                'its tables; tables: %s); left untouched'
                % (', '.join(sorted(found)) or 'none'))

    def _refuse_lost(self, kind, what=None):
        what = what or ('is empty (0 bytes)' if kind is files.Kind.EMPTY
                        else 'is missing')
        found = files.existing_state(self.path, self._beside)
        schema.refuse_lost(what, [os.path.basename(p) for p in found],
                           self.error)
        if kind is files.Kind.EMPTY:
            raise self.error(
                '%s: not a store this program wrote (it writes complete '
                'stores only); remove it to create a new store' % what)

    def _create(self):
        """Build a complete store in a temporary file, link it in place."""
        directory = os.path.dirname(self.path)
        info = schema.new_info(self.owner)
        with files.os_errors(directory, 'create the store'):
            fd, tmp = tempfile.mkstemp(
                dir=directory, prefix='.%s.' % os.path.basename(self.path),
                suffix='.new')
            os.close(fd)
        try:
            with self.errors('create'):
                conn = sqlite3.connect(tmp, isolation_level=None)
                try:
                    schema.create(conn, info)
                finally:
                    conn.close()
            with files.os_errors(self.path, 'create'):
                fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.link(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        files.write_marker(self.path, info['store'], 0)

    def _read_info(self):
        """store_info, after checking (or migrating) the schema."""
        with self.transaction(immediate=False) as tx:
            with tx.sql('read schema') as conn:
                if schema.schema_version(conn, self.error) == \
                        SCHEMA_VERSION:
                    return schema.read_info(conn)
        with self.transaction() as tx:
            with tx.sql('migrate schema 1 to %d' % SCHEMA_VERSION) as conn:
                if schema.schema_version(conn, self.error) == 1:
                    schema.migrate_from_1(conn)
                info = schema.read_info(conn)
        with contextlib.suppress(sqlite3.Error):
            # WAL (set by schema 1) keeps commits in a side file that
            # can be lost on its own; the rollback journal does not.
            self._conn.execute('PRAGMA journal_mode=DELETE').fetchone()
        return info

    # -- transactions ------------------------------------------------------

    def _check_file(self, when):
        if not files.same_file(self.path, self._ident):
            raise self.error(
                '%s: the state file was deleted or replaced since this '
                'process opened it' % when)

    @contextlib.contextmanager
    def transaction(self, immediate=True):
        """A :class:`.store.rows.Transaction`: BEGIN IMMEDIATE, COMMIT or
        ROLLBACK.

        ``immediate=False`` begins a deferred transaction, for reads: it
        takes no write lock until its first write.
        """
        if self._conn is None:
            raise self.error('the store is closed')
        if self._tx is not None:
            raise self.error('a transaction is already open on this '
                             'store (transactions do not nest)')
        self._check_file('cannot begin a transaction')
        with self.errors('begin transaction (waited up to %ss for other '
                         'writers)' % self.busy_timeout):
            self._conn.execute('BEGIN IMMEDIATE' if immediate else 'BEGIN')
        changes = self._conn.total_changes
        tx = self._tx = rows.Transaction(self, self._conn)
        try:
            yield tx
        except BaseException:
            self._close_tx(tx)
            self._rollback()
            raise
        self._close_tx(tx)
        generation = None
        try:
            with self.errors('commit'):
                if self._conn.total_changes != changes:
                    self._check_file('nothing was committed')
                    generation = schema.next_generation(self._conn)
                self._conn.execute('COMMIT')
        except exception.StoreError:
            self._rollback()
            raise
        if generation is not None:
            self._committed(generation)

    def _committed(self, generation):
        if not files.same_file(self.path, self._ident):
            raise self.error(
                'the state file was deleted or replaced while this process '
                'committed to it: the commit (generation %d) is lost, and '
                'what it recorded (a claim, a release) did not happen'
                % generation)
        if self.store_uuid is None:
            return      # opening (a migration): _open writes the marker
        with contextlib.suppress(exception.StoreError):
            # The marker only ever lags: the database is the truth.
            files.write_marker(self.path, self.store_uuid, generation)

    def _rollback(self):
        try:
            self._conn.execute('ROLLBACK')
        except sqlite3.Error:
            pass    # the original error is the one worth reporting

    def _close_tx(self, tx):
        tx.end()
        self._tx = None
