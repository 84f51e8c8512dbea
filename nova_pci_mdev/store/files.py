"""The files of a state store, recognised before anything is written.

A store is the SQLite file ``P`` (the CLI's ``<state dir>/state.db``) and,
beside it:

* ``P.id``, the **marker**: ``{"store": <uuid>, "generation": <n>}``, the
  identity of the store created at ``P`` and the last generation known to
  be committed. It outlives the database file, so a database that is
  missing, empty or replaced (another store, an older copy of this one)
  is recognised as such instead of being taken for a first start;
* ``P.lock``: an ``flock`` that serialises opening (two first runs never
  both create a store);
* SQLite's rollback journal ``P-journal`` while a write transaction runs
  (``P-wal`` / ``P-shm`` of stores that an older release switched to WAL).

Invariants:

* Recognition reads bytes only (:func:`classify`): the 100-byte SQLite
  header and its ``application_id`` (offset 68). Nothing is written to a
  file before it is recognised as a store of ours; a SQLite file of
  another application is refused untouched.
* No state file is followed through a symbolic link, and each must be a
  regular file: :func:`lstat_state_file` refuses anything else.
* Files this module writes appear atomically (temporary file, ``fsync``,
  ``rename``, ``fsync`` of the directory).
* Every filesystem error is a :class:`~nova_pci_mdev.exception.StoreError`
  naming the file.
"""

import contextlib
import enum
import errno as errno_mod
import fcntl
import json
import os
import stat
import tempfile

from nova_pci_mdev import exception

SQLITE_MAGIC = b'SQLite format 3\x00'
#: ``PRAGMA application_id`` of our stores: b'npcm'.
APPLICATION_ID = 0x6E70636D
HEADER_SIZE = 100
MARKER_SUFFIX = '.id'
LOCK_SUFFIX = '.lock'
#: SQLite's files beside the database.
SQLITE_SUFFIXES = ('-journal', '-wal', '-shm')


class Kind(enum.Enum):
    ABSENT = 'absent'
    EMPTY = 'empty'
    OURS = 'ours'              # SQLite, our application_id
    UNMARKED_SQLITE = 'unmarked'   # SQLite, no application_id: look inside


def store_error(path, reason):
    return exception.StoreError(path=path, reason=reason)


def os_reason(action, exc):
    """``'create failed: Read-only file system (EROFS)'``."""
    name = errno_mod.errorcode.get(exc.errno) if exc.errno else None
    text = exc.strerror or str(exc)
    return '%s failed: %s%s' % (action, text, ' (%s)' % name if name else '')


@contextlib.contextmanager
def os_errors(path, action):
    """Turn ``OSError`` into StoreError naming ``path``."""
    try:
        yield
    except OSError as exc:
        raise store_error(path, os_reason(action, exc)) from exc


def lstat_state_file(path):
    """``os.lstat(path)``, or None when nothing is there.

    Raises StoreError for a symbolic link or anything but a regular file.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise store_error(path, os_reason('stat', exc)) from exc
    if stat.S_ISLNK(st.st_mode):
        raise store_error(path, 'is a symbolic link (to %s); state files '
                                'are never followed through links: replace '
                                'it with the file itself'
                          % _readlink(path))
    if not stat.S_ISREG(st.st_mode):
        raise store_error(path, 'is not a regular file (%s)'
                          % _file_kind(st.st_mode))
    return st


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return '?'


def _file_kind(mode):
    for test, name in ((stat.S_ISDIR, 'a directory'),
                       (stat.S_ISFIFO, 'a named pipe'),
                       (stat.S_ISSOCK, 'a socket'),
                       (stat.S_ISCHR, 'a character device'),
                       (stat.S_ISBLK, 'a block device')):
        if test(mode):
            return name
    return 'mode %o' % mode


def _open_nofollow(path, flags, mode=0o600):
    with os_errors(path, 'open'):
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def classify(path):
    """What is at ``path`` (a :class:`Kind`), from its bytes only.

    Raises StoreError for a link or non-regular file, a file that is not
    SQLite, and a SQLite file of another application.
    """
    st = lstat_state_file(path)
    if st is None:
        return Kind.ABSENT
    if st.st_size == 0:
        return Kind.EMPTY
    fd = _open_nofollow(path, os.O_RDONLY)
    try:
        with os_errors(path, 'read'):
            header = os.read(fd, HEADER_SIZE)
    finally:
        os.close(fd)
    if not header.startswith(SQLITE_MAGIC) or len(header) < HEADER_SIZE:
        raise store_error(path, 'not a nova-pci-mdev state store: not an '
                                'SQLite database (first bytes %r)'
                          % header[:16])
    app_id = int.from_bytes(header[68:72], 'big')
    if app_id == APPLICATION_ID:
        return Kind.OURS
    if app_id != 0:
        raise store_error(path, 'not a nova-pci-mdev state store: the '
                                'SQLite file of another application '
                                '(application_id 0x%08x); left untouched'
                          % app_id)
    return Kind.UNMARKED_SQLITE


def same_file(path, ident):
    """True while ``path`` is still the file ``(st_dev, st_ino)``."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def file_ident(path):
    with os_errors(path, 'stat'):
        st = os.lstat(path)
    return st.st_dev, st.st_ino


# -- the lock --

@contextlib.contextmanager
def locked(db_path):
    """Hold ``<db_path>.lock`` exclusively (created if missing)."""
    path = db_path + LOCK_SUFFIX
    lstat_state_file(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise store_error(path, os_reason('open the lock', exc) + ': the '
                          'state directory must be writable, also for '
                          'commands that only show the host') from exc
    try:
        with os_errors(path, 'lock'):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- the marker --

def marker_path(db_path):
    return db_path + MARKER_SUFFIX


def read_marker(db_path):
    """``{'store': uuid, 'generation': n}`` or None when there is none."""
    path = marker_path(db_path)
    if lstat_state_file(path) is None:
        return None
    fd = _open_nofollow(path, os.O_RDONLY)
    with os_errors(path, 'read'), os.fdopen(fd, 'rb') as handle:
        raw = handle.read(4096)
    try:
        doc = json.loads(raw.decode('utf-8'))
    except (UnicodeError, ValueError, RecursionError) as exc:
        raise store_error(path, 'the store marker is not JSON (%s); it '
                                'names the store of this directory: '
                                'restore it or move the directory away'
                          % exc) from None
    if (not isinstance(doc, dict) or not isinstance(doc.get('store'), str)
            or isinstance(doc.get('generation'), bool)
            or not isinstance(doc.get('generation'), int)):
        raise store_error(path, 'the store marker holds %r, expected '
                                '{"store": "<uuid>", "generation": <n>}'
                          % (doc,))
    return doc


def write_marker(db_path, store_uuid, generation):
    """Publish the marker atomically and durably."""
    write_atomically(marker_path(db_path), json.dumps(
        {'store': store_uuid, 'generation': generation},
        sort_keys=True).encode('utf-8') + b'\n')


def write_atomically(path, data):
    directory = os.path.dirname(path)
    with os_errors(path, 'write'):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.'
                                   % os.path.basename(path), suffix='.tmp')
        try:
            with os.fdopen(fd, 'wb') as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_directory(directory)


def fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- what else is there --

def existing_state(db_path, beside=()):
    """The files that show a store was here before: its marker, SQLite's
    journals, and ``beside`` (the caller's own state files)."""
    candidates = [marker_path(db_path)]
    candidates += [db_path + suffix for suffix in SQLITE_SUFFIXES]
    candidates += list(beside)
    return [p for p in candidates if os.path.lexists(p)]
