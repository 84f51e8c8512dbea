"""The schema of the state store, its identity rows and their checks.

Pure SQL on a connection the caller opened (:mod:`.store` does the
opening and the transactions); every refusal is raised through the
caller's ``error(reason)`` so that it names the store's file.

Schema 2 (schema 1 had no ``store_info`` and an unused ``documents``
table)::

    schema_version (version)
    store_info     (key, value)   format, store (uuid), generation,
                                  owner.<key> (connection, compute_node)
    devices        (one column per PciDevice field)
    instances      (uuid, data)   data: the instance record as JSON

The SQLite header's ``application_id`` is
:data:`~.store.files.APPLICATION_ID`.
"""

import uuid as uuid_lib

from nova_pci_mdev.store import files as store_files

SCHEMA_VERSION = 2
FORMAT = 'nova-pci-mdev state store'
OWNER = 'owner.'
#: store_info key of a store whose marker is not published yet (created
#: or migrated, the marker not yet known to be written): only such a
#: store may be opened without its marker (see :func:`check_identity`).
PENDING = 'marker_pending'

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
COLUMN_NAMES = tuple(name for name, _sql in DEVICE_COLUMNS)

_INFO_TABLE = ('CREATE TABLE store_info (key TEXT PRIMARY KEY, '
               'value TEXT NOT NULL)')
_SCHEMA = (
    'CREATE TABLE schema_version (version INTEGER NOT NULL)',
    _INFO_TABLE,
    'CREATE TABLE devices (%s)' % ', '.join(
        '%s %s' % column for column in DEVICE_COLUMNS),
    'CREATE INDEX devices_instance ON devices (instance_uuid)',
    'CREATE TABLE instances (uuid TEXT PRIMARY KEY, data TEXT NOT NULL)',
)
_APPLICATION_ID = 'PRAGMA application_id = %d' % store_files.APPLICATION_ID


def tables(conn):
    return {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


def new_info(owner):
    """The store_info rows of a new store owned by ``owner``."""
    info = {'format': FORMAT, 'store': str(uuid_lib.uuid4()),
            'generation': '0', PENDING: '1'}
    info.update((OWNER + k, v) for k, v in owner.items())
    return info


def create(conn, info):
    """Create the schema and ``info`` in an empty database (autocommit
    connection; one transaction)."""
    conn.execute('PRAGMA journal_mode=DELETE').fetchone()
    conn.execute('BEGIN IMMEDIATE')
    conn.execute(_APPLICATION_ID)
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.execute('INSERT INTO schema_version (version) VALUES (?)',
                 (SCHEMA_VERSION,))
    conn.executemany('INSERT INTO store_info (key, value) VALUES (?, ?)',
                     sorted(info.items()))
    conn.execute('COMMIT')


def looks_like_schema_1(conn):
    """True for the tables of a schema 1 store (read only)."""
    found = tables(conn)
    if not {'schema_version', 'devices', 'instances'} <= found:
        return False, found
    row = conn.execute('SELECT MAX(version) FROM schema_version').fetchone()
    return (row is not None and row[0] == 1), found


def schema_version(conn, error):
    """The schema version (1 or SCHEMA_VERSION); refuses the rest."""
    found = tables(conn)
    if 'schema_version' not in found:
        raise error('not a nova-pci-mdev state store (no schema_version '
                    'table; tables: %s)' % ', '.join(sorted(found)))
    row = conn.execute('SELECT MAX(version) FROM schema_version').fetchone()
    version = row[0] if row else None
    if not isinstance(version, int):
        raise error('schema_version holds %r, expected an integer'
                    % (version,))
    if version > SCHEMA_VERSION:
        raise error('schema version %d is newer than this nova-pci-mdev '
                    'understands (%d); use the newer release or another '
                    'state directory' % (version, SCHEMA_VERSION))
    if version < 1 or (version == 1) == ('store_info' in found):
        raise error('schema version %d does not match its tables (%s)'
                    % (version, ', '.join(sorted(found))))
    return version


def migrate_from_1(conn):
    """Schema 1 -> 2 inside the caller's write transaction."""
    conn.execute('DROP TABLE IF EXISTS documents')
    conn.execute(_INFO_TABLE)
    conn.executemany('INSERT INTO store_info (key, value) VALUES (?, ?)',
                     sorted(new_info({}).items()))
    conn.execute('UPDATE schema_version SET version = ?', (SCHEMA_VERSION,))
    conn.execute(_APPLICATION_ID)


def read_info(conn):
    return dict(conn.execute('SELECT key, value FROM store_info'))


def put_info(conn, items):
    conn.executemany('INSERT OR REPLACE INTO store_info (key, value) '
                     'VALUES (?, ?)', sorted(items.items()))


def clear_pending(conn):
    """The marker is published: from now on it must be there."""
    conn.execute('DELETE FROM store_info WHERE key = ?', (PENDING,))


def next_generation(conn):
    """Count the generation up; return the new value."""
    conn.execute("UPDATE store_info SET value = CAST(value AS INTEGER) + 1 "
                 "WHERE key = 'generation'")
    row = conn.execute("SELECT value FROM store_info WHERE key = "
                       "'generation'").fetchone()
    return int(row[0])


_RESCUE = ('Restore it, or move the state directory away to start with no '
           'claims')


def check_identity(info, marker, marker_path, error):
    """The store's UUID, after checking ``info`` against the marker
    (``{'store', 'generation'}`` or None), both ways.

    The rule for a missing marker: a store is created (or migrated from
    schema 1) with :data:`PENDING`, its marker is written, and only then
    is PENDING cleared, by a commit of its own. So a store without
    PENDING had its marker: its absence means it was deleted, or the
    database put back from an older copy without it, and is refused as a
    missing database beside a marker is. A store with PENDING is one a
    crash interrupted between the database and its marker (it holds no
    claim made since: the first claim comes after PENDING is cleared),
    and is opened; the caller refuses a new one (generation 0) beside
    earlier state."""
    store_uuid = info.get('store')
    generation = info.get('generation')
    if (info.get('format') != FORMAT or not store_uuid
            or not str(generation).isdigit()):
        raise error('its store_info table is damaged (%r)' % (info,))
    if marker is None:
        if info.get(PENDING) == '1':
            return store_uuid
        raise error('is store %s at generation %s, but its marker %s is '
                    'missing: the marker was deleted, or an older copy of '
                    'the database was put back without it (the claims '
                    'made since would be forgotten and their devices '
                    'handed out again). If this database is the current '
                    'one, put the marker back: write {"store": "%s", '
                    '"generation": %s} to %s. Otherwise restore the '
                    'directory, or move it away to start with no claims'
                    % (store_uuid, generation, marker_path, store_uuid,
                       generation, marker_path))
    if marker['store'] != store_uuid:
        raise error('is store %s, but the marker %s names store %s: the '
                    'database was replaced by another store. %s'
                    % (store_uuid, marker_path, marker['store'], _RESCUE))
    if int(generation) < marker['generation']:
        raise error('is generation %s of store %s, older than generation %d '
                    'recorded in %s: an older copy replaced it, and the '
                    'claims made since would be forgotten. %s'
                    % (generation, store_uuid, marker['generation'],
                       marker_path, _RESCUE))
    return store_uuid


def check_owner(info, owner, error):
    """Refuse a store recorded for another owner; return the owner keys
    that are not recorded yet (to record)."""
    recorded = {k[len(OWNER):]: v for k, v in info.items()
                if k.startswith(OWNER)}
    clash = sorted(k for k, v in owner.items() if recorded.get(k, v) != v)
    if clash:
        raise error('belongs to %s, not to %s: a state directory holds the '
                    'state of one host; give each host (connection) its own '
                    'state directory' % (_describe(recorded, clash),
                                         _describe(owner, clash)))
    return {OWNER + k: v for k, v in owner.items() if k not in recorded}


def refuse_lost(what, found, error):
    """A missing or empty database: refused beside earlier state."""
    if found:
        raise error('%s but the state directory has state of an earlier '
                    'store (%s): the store was lost or truncated, and '
                    'starting afresh would forget every claim. %s'
                    % (what, ', '.join(found), _RESCUE))


def _describe(owner, keys):
    return ', '.join('%s %s' % (k.replace('_', ' '), owner.get(k, '?'))
                     for k in keys)
