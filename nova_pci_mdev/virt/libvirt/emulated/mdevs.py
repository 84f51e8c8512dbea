"""mdevs emulated in a JSON file, for ``test://`` libvirt connections.

libvirt's test driver cannot create mdevs, so the CLI on the bundled sample
host (or any host XML file) keeps them here, in ``<state_dir>/mdevs.json``::

    {"version": 1,
     "mdevs": {"<uuid>": {"parent": "0000:84:00.0", "mdev_type": "nvidia-35"}}}

Invariants:

* Capacity comes from the caller as ``host_types = {(parent, type): total}``
  (or a callable returning it, called when first needed)
  where ``total`` is how many mdevs of that type the parent holds in all
  (existing + ``availableInstances`` of the host XML); ``available()`` is
  ``total`` minus the mdevs of that pair in the file, never below 0, and
  ``create`` refuses beyond it (``EUSERS``, like the kernel's mdev core).
* ``initial`` mdevs (those the host XML already has) seed the file when
  the first backend on ``state_dir`` is built; afterwards the file is the
  truth and ``initial`` is ignored.
* Every change is a read-modify-write under an exclusive ``flock`` on
  ``mdevs.json.lock`` and is published by an atomic rename of a fsynced
  temporary file, so concurrent CLI processes never lose an update and a
  reader never sees half a file. Every operation re-reads the file, so two
  backends on one directory see each other's changes.
* The file is validated when read (names included); a corrupt file raises
  ``StoreError`` naming it.

It doubles as the in-memory-ish test double of the lifecycle interface.
"""

import contextlib
import errno
import fcntl
import json
import os
import tempfile

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev import names
from nova_pci_mdev.store import files as store_files
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev

STATE_FILE = 'mdevs.json'
STATE_VERSION = 1


class EmulatedBackend(mdev.MdevBackend):
    """mdevs kept in ``<state_dir>/mdevs.json``."""

    def __init__(self, state_dir, host_types, initial=()):
        self.state_dir = os.path.abspath(state_dir)
        self.path = os.path.join(self.state_dir, STATE_FILE)
        # Either may be a callable, called when first needed (the host's
        # capacity is known only after reading its host file).
        self._host_types = host_types
        self._totals_cache = None
        with store_files.os_errors(self.state_dir, 'create the directory'):
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        with self._locked():
            if not os.path.lexists(self.path):
                seed = {}
                for slot in (initial() if callable(initial) else initial):
                    info = mdev.as_info(slot)
                    seed[info.uuid] = info
                self._save(seed)
        if not callable(host_types):
            self._totals_cache = self._totals

    @property
    def _totals(self):
        if self._totals_cache is not None:
            return self._totals_cache
        host_types = self._host_types
        totals = {}
        for key, total in dict(host_types() if callable(host_types)
                               else host_types).items():
            try:
                parent, mdev_type = key
            except (TypeError, ValueError):
                raise exception.InvalidValue(
                    field='host_types key', value=key,
                    rule='expected (parent, mdev_type)')
            if (isinstance(total, bool) or not isinstance(total, int)
                    or total < 0):
                raise exception.InvalidValue(
                    field='host_types[%r]' % (key,), value=total,
                    rule='expected a non-negative integer')
            totals[(names.normalize_address(parent),
                    names.validate_mdev_type(mdev_type))] = total
        self._totals_cache = totals
        return totals

    # -- file --------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self):
        # The directory is never created again here: one that vanished
        # while the host is in use is an error, not a fresh start.
        lock = self.path + '.lock'
        with store_files.os_errors(lock, 'open the lock'):
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                         | os.O_NOFOLLOW, 0o600)
        try:
            with store_files.os_errors(lock, 'lock'):
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _load(self):
        try:
            doc = input_files.load_json(self.path, follow=False)
        except FileNotFoundError:
            return {}           # removed behind our back: no mdevs
        except (OSError, ValueError) as exc:
            raise exception.StoreError(path=self.path, reason=str(exc))
        if (not isinstance(doc, dict) or doc.get('version') != STATE_VERSION
                or not isinstance(doc.get('mdevs'), dict)):
            raise exception.StoreError(
                path=self.path,
                reason='expected {"version": %d, "mdevs": {...}}'
                       % STATE_VERSION)
        result = {}
        for uuid, entry in doc['mdevs'].items():
            try:
                info = mdev.mdev_info(uuid, entry['parent'],
                                      entry['mdev_type'])
            except (exception.Invalid, KeyError, TypeError) as exc:
                raise exception.StoreError(
                    path=self.path,
                    reason='bad mdev entry %r: %s' % (uuid, exc))
            result[info.uuid] = info
        return result

    def _save(self, mdevs):
        doc = {'version': STATE_VERSION,
               'mdevs': {u: {'parent': i.parent, 'mdev_type': i.mdev_type}
                         for u, i in sorted(mdevs.items())}}
        with store_files.os_errors(self.state_dir, 'write %s' % STATE_FILE):
            self._write(doc)

    def _write(self, doc):
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix='.mdevs.',
                                   suffix='.tmp')
        try:
            with os.fdopen(fd, 'w') as f:
                json.dump(doc, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _used(self, mdevs, parent, mdev_type):
        return sum(1 for info in mdevs.values()
                   if info.parent == parent and info.mdev_type == mdev_type)

    # -- interface ---------------------------------------------------------

    def list(self):
        return self._load()

    def create(self, uuid, parent, mdev_type):
        info = mdev.mdev_info(uuid, parent, mdev_type)
        with self._locked():
            mdevs = self._load()
            if info.uuid in mdevs:
                raise _error(info, errno.EEXIST,
                             'create of type %s' % info.mdev_type)
            total = self._totals.get((info.parent, info.mdev_type))
            if total is None:
                raise _error(info, errno.ENOENT,
                             'create of type %s (not exposed by the parent)'
                             % info.mdev_type)
            if self._used(mdevs, info.parent, info.mdev_type) >= total:
                raise _error(info, errno.EUSERS,
                             'create of type %s (all %d instances used)'
                             % (info.mdev_type, total))
            mdevs[info.uuid] = info
            self._save(mdevs)

    def remove(self, uuid):
        uuid = names.normalize_uuid(uuid)
        with self._locked():
            mdevs = self._load()
            info = mdevs.pop(uuid, None)
            if info is None:
                raise exception.MdevNotFound(
                    uuid=uuid, parent='unknown', errno='ENOENT',
                    reason='remove failed: no such mdev in %s' % self.path)
            self._save(mdevs)

    def available(self, parent, mdev_type):
        parent = names.normalize_address(parent)
        mdev_type = names.validate_mdev_type(mdev_type)
        total = self._totals.get((parent, mdev_type))
        if total is None:
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent, errno='ENOENT',
                reason='the parent does not expose this type')
        return max(0, total - self._used(self._load(), parent, mdev_type))


def _error(info, err, action):
    return mdev.os_error(OSError(err, os.strerror(err)), info.uuid,
                         info.parent, action)
