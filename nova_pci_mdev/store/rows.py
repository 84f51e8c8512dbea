"""The rows of one store transaction: devices, instances, the sync note.

A :class:`Transaction` exists only inside
:meth:`.sqlite.SqliteStore.transaction` and refuses every use once that
block has ended (committed or rolled back). Every error it meets is the
store's :class:`~nova_pci_mdev.exception.StoreError`, naming the file and
what was being done. Reads validate what they read (a stored device goes
through its fields' ``coerce``); nothing here begins, commits or rolls
back: that is the store's job.
"""

import contextlib
import json

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.store import schema

_COLUMN_NAMES = schema.COLUMN_NAMES
_BUSY = frozenset((fields.PciDeviceStatus.CLAIMED,
                   fields.PciDeviceStatus.ALLOCATED))
#: Disagreements a refusal names (then a count of the rest).
_SHOWN = 5
#: store_info key of the last sync's note (a JSON document).
SYNC_NOTE = 'sync_note'
#: store_info key of the pools of the devices table as the last session
#: that changed it left them (their oslo.versionedobjects primitive).
POOLS = 'pools'
_GONE = frozenset(fields.PciDeviceStatus.GONE)


class DeviceRow(object):
    """One stored device as it was read, for display: its fields as
    attributes (a NULL column reads None, ``extra_info`` as its JSON
    document), :meth:`stored` / :meth:`stored_values` as a
    :class:`PciDevice` has them, and its relatives' links
    (``parent_device``, ``child_devices``, set by whoever links the rows).
    Nothing is validated or built, so a view of ten thousand rows costs
    what reading them costs."""

    __slots__ = _COLUMN_NAMES + ('parent_device', 'child_devices')

    def __init__(self, row):
        for name, value in zip(_COLUMN_NAMES, row):
            setattr(self, name, value)
        self.parent_device = None
        self.child_devices = []

    @property
    def is_parent(self):
        return self.dev_type in fields.PciDeviceType.PARENT_TYPES

    @property
    def is_child(self):
        return self.dev_type in fields.PciDeviceType.CHILD_TYPES

    def stored(self, name, default=None):
        value = getattr(self, name, None) if name in _COLUMN_NAMES else None
        return default if value is None else value

    def stored_values(self, names):
        return tuple(self.stored(n) for n in names)

    def __contains__(self, name):
        """Whether field ``name`` holds a value (``name in device``)."""
        return self.stored(name) is not None


class Transaction(object):
    """What may be done inside :meth:`SqliteStore.transaction`."""

    def __init__(self, store, conn):
        self._store = store
        self._conn = conn
        self._open = True

    def end(self):
        """The store's block ended (committed or rolled back): every use
        from now on is refused."""
        self._open = False

    @contextlib.contextmanager
    def sql(self, action):
        """The connection, for ``action`` (a phrase naming what is done):
        every error it raises becomes the store's StoreError naming the
        file and ``action``."""
        if not self._open:
            raise self._store.error(
                '%s: the transaction is already closed' % action)
        with self._store.errors(action):
            yield self._conn

    # -- devices -----------------------------------------------------------

    def load_devices(self, where=None, args=()):
        """Every stored device as a :class:`PciDevice` (by address), or
        those of the SQL condition ``where`` (with ``args``).

        Each column goes through its field's setter (its validation); a
        NULL in a column whose field is not nullable leaves the field
        unset. A loaded device records no change. Rows are read one by
        one, never all held at once beside the devices.
        """
        cls = pci_device.PciDevice
        fields = cls.fields
        extra_at = _COLUMN_NAMES.index('extra_info')
        devices = []
        with self.sql('load devices') as conn:
            for row in conn.execute(
                    'SELECT %s FROM devices %sORDER BY address'
                    % (', '.join(_COLUMN_NAMES),
                       'WHERE %s ' % where if where else ''), args):
                try:
                    values = {name: value
                              for name, value in zip(_COLUMN_NAMES, row)
                              if value is not None or fields[name].nullable}
                    values['extra_info'] = json.loads(row[extra_at])
                    dev = cls(**values)
                    dev.obj_reset_changes()
                    devices.append(dev)
                except (exception.NovaPciMdevException, ValueError,
                        TypeError, OverflowError, RecursionError) as exc:
                    raise self._store.error(
                        'stored device %s is invalid: %s' % (row[0], exc))
        return devices

    def load_trees(self, conditions, addresses=()):
        """The devices of every tree that holds a row of ``conditions``
        (``[(SQL condition, args)]``) or of ``addresses``, as
        :meth:`load_devices` makes them,
        by address: each such row's ancestors (by ``parent_addr``) up to
        its root, and everything below that root.

        What a claim or a release of a few devices reads instead of the
        whole table (:meth:`.compute.host.ComputeHost.session`): a free
        device's status follows from its relatives, so whole trees are
        read, never part of one. Cost: the tree rows found, plus one
        indexless scan of the table per level and per
        :data:`_CHUNK` addresses.
        """
        links = {}          # address -> parent_addr
        with self.sql('find device trees') as conn:
            for where, args in conditions:
                links.update(conn.execute(
                    'SELECT address, parent_addr FROM devices WHERE %s'
                    % where, args))
            links.update(_links(conn, 'address', addresses))
            todo = {p for p in links.values() if p and p not in links}
            while todo:                 # up to the roots
                found = _links(conn, 'address', todo)
                links.update(found)
                todo = {p for p in found.values() if p and p not in links}
            todo = set(links)
            while todo:                 # down from every device found
                found = {a: p for a, p in
                         _links(conn, 'parent_addr', todo).items()
                         if a not in links}
                links.update(found)
                todo = set(found)
        devices = []
        for chunk in _chunks(sorted(links)):
            devices.extend(self.load_devices(
                'address IN (%s)' % ', '.join('?' * len(chunk)), chunk))
        devices.sort(key=lambda dev: dev.address)
        return devices

    def device_rows(self):
        """Every stored device the tracker would hold (not removed or
        deleted) as a :class:`DeviceRow`, by address; a row whose
        ``extra_info`` is not a JSON object is the store's StoreError."""
        extra_at = _COLUMN_NAMES.index('extra_info')
        status_at = _COLUMN_NAMES.index('status')
        out = []
        with self.sql('read devices') as conn:
            for row in conn.execute('SELECT %s FROM devices ORDER BY address'
                                    % ', '.join(_COLUMN_NAMES)):
                if row[status_at] is None or row[status_at] in _GONE:
                    continue
                dev = DeviceRow(row)
                dev.extra_info = self._loads('device %s' % row[0],
                                             row[extra_at])
                if not isinstance(dev.extra_info, dict):
                    raise self._store.error('stored device %s is invalid: '
                                            'extra_info is not an object'
                                            % row[0])
                out.append(dev)
        return out

    def _busy_devices(self):
        """The devices in use (claimed, allocated), as :meth:`load_devices`
        makes them."""
        marks = ', '.join('?' * len(_BUSY))
        return self.load_devices('status IN (%s)' % marks, tuple(_BUSY))

    def save_devices(self, devices):
        """Insert or replace the rows of ``devices`` (by address)."""
        rows = []
        for dev in devices:
            row = []
            for name in _COLUMN_NAMES:
                value = dev.stored(name)        # None when not set
                if name == 'extra_info':
                    value = json.dumps(value or {}, sort_keys=True)
                row.append(value)
            rows.append(row)
        with self.sql('save devices') as conn:
            conn.executemany(
                'INSERT OR REPLACE INTO devices (%s) VALUES (%s)' % (
                    ', '.join(_COLUMN_NAMES),
                    ', '.join('?' * len(_COLUMN_NAMES))), rows)

    def delete_devices(self, addresses):
        """Delete the rows of ``addresses`` (unknown ones are ignored)."""
        with self.sql('delete devices') as conn:
            conn.executemany('DELETE FROM devices WHERE address = ?',
                             [(address,) for address in addresses])

    # -- the last sync's note ------------------------------------------------

    def sync_note(self):
        """The JSON document :meth:`put_sync_note` recorded (the digest of
        the last sync's input and its by-products, :mod:`.synced`), or
        None. A note that is not valid JSON reads as None: it only ever
        makes the next sync run."""
        with self.sql('read the sync note') as conn:
            row = conn.execute('SELECT value FROM store_info WHERE key = ?',
                               (SYNC_NOTE,)).fetchone()
        try:
            note = json.loads(row[0]) if row is not None else None
        except (TypeError, ValueError, RecursionError):
            return None
        return note if isinstance(note, dict) else None

    def put_sync_note(self, note):
        text = self._dumps('the sync note', note)
        with self.sql('write the sync note') as conn:
            conn.execute('INSERT OR REPLACE INTO store_info (key, value) '
                         'VALUES (?, ?)', (SYNC_NOTE, text))

    # -- the pools a session left ---------------------------------------------

    def pools(self):
        """The :class:`PciDevicePoolList` :meth:`put_pools` recorded, or
        None (none recorded, or not one this code reads: the caller then
        builds the pools from the devices)."""
        from nova_pci_mdev.objects import pci_device_pool
        with self.sql('read the pools') as conn:
            row = conn.execute('SELECT value FROM store_info WHERE key = ?',
                               (POOLS,)).fetchone()
        if row is None:
            return None
        try:
            return pci_device_pool.PciDevicePoolList.obj_from_primitive(
                json.loads(row[0]))
        except Exception:   # any unreadable summary: rebuilt, never trusted
            return None

    def put_pools(self, pools):
        text = self._dumps('the pools', pools.obj_to_primitive())
        with self.sql('write the pools') as conn:
            conn.execute('INSERT OR REPLACE INTO store_info (key, value) '
                         'VALUES (?, ?)', (POOLS, text))

    def forget_pools(self):
        """Drop the recorded pools (:meth:`pools` then reads None)."""
        with self.sql('forget the pools') as conn:
            conn.execute('DELETE FROM store_info WHERE key = ?', (POOLS,))

    # -- both, and their agreement -------------------------------------------

    def load_state(self):
        """``(devices, instances, busy)``: :meth:`load_devices`,
        :meth:`instances` and the devices in use (claimed, allocated),
        after checking that the two tables agree: every device an
        instance's record lists is in use by that instance, and every
        device in use is listed by its instance's record. A disagreement
        (a row set back to available or deleted, an owner changed by hand)
        would hand a device a guest holds to another: StoreError naming
        it, and nothing is read further (the caller's transaction rolls
        back: nothing is written)."""
        devices = self.load_devices()
        instances = self.instances()
        busy = [d for d in devices if d.status in _BUSY]
        self._check_agree(instances, busy, devices)
        return devices, instances, busy

    def load_held(self):
        """``(instances, busy)`` of :meth:`load_state` without loading the
        free devices, checked the same way (a device an instance's record
        lists but is not in use is then read by itself)."""
        instances = self.instances()
        busy = self._busy_devices()
        self._check_agree(instances, busy, None)
        return instances, busy

    def _check_agree(self, instances, busy, devices):
        if devices is None:
            def lookup(address):
                found = self.load_devices('address = ?', (address,))
                return found[0] if found else None
        else:
            lookup = {d.address: d for d in devices}.get
        problems = disagreements(lookup, instances, busy)
        if problems:
            raise self._store.error(
                'its devices and instances tables disagree: %s%s (the '
                'store was edited or damaged; a device a guest holds could '
                'be handed out again). Nothing was changed: restore the '
                'state directory from a copy, or make the rows agree again'
                % ('; '.join(problems[:_SHOWN]), '; and %d more'
                   % (len(problems) - _SHOWN) if len(problems) > _SHOWN
                   else ''))

    # -- instances ---------------------------------------------------------

    def instances(self):
        """dict instance uuid -> its stored JSON document."""
        with self.sql('load instances') as conn:
            rows = conn.execute(
                'SELECT uuid, data FROM instances ORDER BY uuid').fetchall()
        return {uuid: self._loads('instance %s' % uuid, data)
                for uuid, data in rows}

    def save_instance(self, instance_uuid, data):
        text = self._dumps('instance %s' % instance_uuid, data)
        with self.sql('save instance %s' % instance_uuid) as conn:
            conn.execute('INSERT OR REPLACE INTO instances (uuid, data) '
                         'VALUES (?, ?)', (instance_uuid, text))

    def delete_instance(self, instance_uuid):
        with self.sql('delete instance %s' % instance_uuid) as conn:
            conn.execute('DELETE FROM instances WHERE uuid = ?',
                         (instance_uuid,))

    def _loads(self, what, text):
        try:
            return json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise self._store.error('stored %s is not valid JSON: %s'
                                    % (what, exc)) from None

    def _dumps(self, what, value):
        try:
            return json.dumps(value, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise self._store.error('%s is not JSON: %s' % (what, exc))


def disagreements(lookup, instances, busy):
    """What the devices table and the instances table (``{uuid:
    record}``, each record listing its ``devices``) say differently, one
    text per device; ``busy``: the devices in use, ``lookup(address)``:
    the stored device of an address (None if there is none).
    Linear in the records' devices and ``busy``; every device is looked
    at only when a record lists one not in use."""
    listed = {}
    problems = []
    for uuid, record in sorted(instances.items()):
        addresses = record.get('devices') if isinstance(record, dict) else ()
        if not isinstance(addresses, list):
            problems.append('the record of instance %s lists %r, not device '
                            'addresses' % (uuid, addresses))
            continue
        for address in addresses:
            other = listed.setdefault(address, uuid)
            if other != uuid:
                problems.append('device %s is listed by instances %s and %s'
                                % (address, other, uuid))
    in_use = {}
    for dev in busy:
        in_use[dev.address] = dev
        owner = listed.get(dev.address)
        if owner is None:
            problems.append('device %s is %s by instance %s, %s' % (
                dev.address, dev.status, dev.instance_uuid,
                'whose record does not list it' if dev.instance_uuid in
                instances else 'which has no record'))
        elif owner != dev.instance_uuid:
            problems.append('device %s is %s by instance %s, but instance '
                            '%s lists it' % (dev.address, dev.status,
                                             dev.instance_uuid, owner))
    for address, uuid in sorted(listed.items()):
        if address in in_use:
            continue
        dev = lookup(address)
        problems.append('instance %s lists device %s, %s' % (
            uuid, address, 'which is not in the devices table' if dev is None
            else 'which is %s' % dev.status))
    return problems


#: Addresses per ``IN (...)`` of :meth:`Transaction.load_trees` (well
#: below SQLite's limit of bound parameters).
_CHUNK = 500


def _chunks(items):
    items = list(items)
    return [items[i:i + _CHUNK] for i in range(0, len(items), _CHUNK)]


def _links(conn, column, addresses):
    """``{address: parent_addr}`` of the rows whose ``column`` is one of
    ``addresses``."""
    found = {}
    for chunk in _chunks(addresses):
        found.update(conn.execute(
            'SELECT address, parent_addr FROM devices WHERE %s IN (%s)'
            % (column, ', '.join('?' * len(chunk))), chunk))
    return found
