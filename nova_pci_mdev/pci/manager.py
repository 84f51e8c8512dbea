"""The PCI device tracker of one compute host.

:class:`PciDevTracker` is the host's single source of truth for which
assignable device (PCI function, mdev parent, mdev slot) exists, who holds
it, and which free devices the pools offer. It is pure logic: device
records come in from the host adapter, claims come in from the caller, and
the changes go out through :meth:`PciDevTracker.pop_changes` to a store.

Invariants (checked by ``tests/unit/pci/test_tracker_properties.py`` over
random sequences of operations):

* ``devices`` maps each address to exactly one :class:`PciDevice`; a
  removed or deleted device is never in it.
* A device is ``claimed``/``allocated`` iff it has an ``instance_uuid``,
  and then it is listed under that instance, and only there, in the
  per-instance index: no device is ever held by two instances.
* A device is in the pools (``stats``) iff its status is ``available``
  (the pools also remember busy devices, uncounted, to explain refusals).
* Parent/child consistency: ``dev.parent_device`` is the tracked parent
  named by ``dev.parent_addr`` (when that is a parent type), and the
  parent lists it once in ``child_devices``. Links may nest: a PF above
  an mdev-capable VF (``mdev-pf``) above its slots (three levels). The
  status of every free device follows from its relatives: ``unavailable``
  / ``unclaimable`` while an ancestor is allocated / claimed, else while a
  descendant is allocated / claimed; otherwise ``available``. So a device
  in use never has an ancestor or a descendant in use.
* Nothing in use is lost: a claimed or allocated device that vanished from
  the host or fell out of the whitelist stays, flagged
  ``extra_info['missing'] = 'true'`` and reported as ``kept`` by every
  sync, until it is freed; then it is deleted. A free device that vanished
  is removed at once; a device that reappears loses its flag.
* An allocation never moves: a device in use whose record names another
  parent (an mdev that came back under another GPU after a reboot), or a
  slot whose record has another type, keeps its parent, NUMA node and
  type (:mod:`.held_back`).
* A failed claim changes nothing (statuses, owners, pools, pending
  changes).
* Slots still to create (:mod:`.capacity`) are counted on their parent and
  made, with the UUIDs of the ``slot_factory``, only by the claim that
  takes them: the parent's count drops by exactly the slots made, and a
  failed claim forgets them again. Without a ``slot_factory`` such counts
  are not offered.

The state and its bookkeeping (links, owners, change log) are
:class:`.device_table.DeviceTable`; claims and frees, and the slots still
to create that claims make, are :class:`.tracker_claims.ClaimsMixin`; this
module syncs from the host and keeps the pools.

Cost: every operation is linear in the devices it reads (a sync in the
number of devices and records, a claim or free in the devices of the
instance and their relatives). Lookups are by address in dicts and sets;
devices are compared by identity, never field by field.
"""

import typing

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import held_back
from nova_pci_mdev.pci import stats as pci_stats
from nova_pci_mdev.pci import tracker_claims

Status = fields.PciDeviceStatus
_MDEV_PF = fields.PciDeviceType.MDEV_PF


class SyncReport(typing.NamedTuple):
    """What one :meth:`PciDevTracker.sync` did, as tuples of addresses."""

    added: tuple
    updated: tuple
    removed: tuple
    kept: tuple


class PciDevTracker(tracker_claims.ClaimsMixin,
                    device_table.DeviceTable):
    """Devices of one host, their owners and the pools of free ones.

    :param whitelist: an object with ``match(dev) -> spec | None`` where
        ``spec.tags`` is a dict (``pci.whitelist.Whitelist``); ``dev`` is a
        device record dict or a :class:`PciDevice`. Its answers may change
        between syncs, unless its ``pure`` attribute is True: then an
        answer depends on the device alone.
    :param numa_topology: the host's ``numa.HostTopology`` (for the pools).
    :param devices: :class:`PciDevice` objects loaded from a store. They are
        checked against the whitelist like a sync would (a free device that
        is no longer whitelisted is removed, a busy one flagged missing),
        and the free statuses are re-derived from their relatives; whatever
        that changes is reported by :meth:`pop_changes`.
    """

    def __init__(self, whitelist, numa_topology=None, devices=(),
                 slot_factory=None):
        super().__init__()
        self._whitelist = whitelist
        # Whether its answer is a function of the record alone (``pure``),
        # so that a record equal to one applied before needs no question.
        self._pure = getattr(whitelist, 'pure', False) is True
        self._slot_factory = slot_factory
        self._made = []            # (parent, new slots) of the claim
        self._slot_tags = {}       # parent address -> (fields, tags)
        self._held_back = held_back.HeldBack()
        self.stats = pci_stats.PciDeviceStats(
            numa_topology, tags_of=self._tags_of,
            materialise=self._materialise)
        for dev in devices:
            if dev.stored('status') in (None,) + tuple(Status.GONE):
                continue
            dev.parent_device = None
            dev.child_devices = []
            self._devs[dev.address] = dev
        for dev in list(self._devs.values()):
            spec = whitelist.match(dev)
            if spec is not None:
                self._tags[dev.address] = dict(spec.tags or {})
            elif dev.status in Status.BUSY:
                if not device_table.is_missing(dev):
                    self._set_missing(dev, True)
            else:
                self._forget(dev, unlink=False)
                continue
            if dev.status in Status.BUSY and dev.instance_uuid:
                self._index_add(dev.instance_uuid, dev.address)
        self._relink()
        self._normalise()
        for dev in self._devs.values():
            self._refresh(dev)

    # -- sync from the host ------------------------------------------------

    def sync(self, records):
        """Bring the devices in line with the host's device records.

        Records the whitelist does not match are ignored. Returns a
        :class:`SyncReport`; ``kept`` lists every in-use device that is
        missing from the host (or from the whitelist) after this sync.

        Cost: one lookup and one dict comparison for a record equal to the
        one applied last (the steady state); links and statuses are
        re-derived in one cheap pass when a device was added or changed
        (only the devices that changed, and their relatives, move between
        pools); a sync that only removed devices touches their relatives
        alone.
        """
        seen = self._whitelisted(records)
        # Build the new devices first: a record a device cannot hold fails
        # the sync before anything has changed.
        create = pci_device.PciDevice.create
        new = {address: create(entry[0], address)
               for address, entry in seen.items()
               if entry is not None and address not in self._devs}
        removed, kept, touched, gone = self._drop_unseen(seen)
        added, updated, retagged, held = self._apply(seen, new)
        kept.extend(held)
        touched.extend(self._devs[a] for a in kept)
        if added or updated or retagged:
            touched.extend(self._devs[a] for a in added + updated + retagged)
            self._relink()
            self._settle(touched)
        elif removed:
            self._unlink_gone(gone)
            self._settle_near(touched)
        return SyncReport(tuple(added), tuple(updated), tuple(removed),
                          tuple(kept))

    def _settle(self, touched):
        """After a relink: every free status derived again, and the
        devices ``touched`` (with their relatives, and whatever status
        changed) put in the pools where they belong."""
        changed = self._normalise()
        devs = self._devs
        if 2 * len(touched) >= len(devs):
            todo = list(devs.values())    # a first sync: all, no walks
        else:
            near = {dev.address: dev for dev in device_table.family(
                [d for d in touched if devs.get(d.address) is d])}
            near.update((dev.address, dev) for dev in changed)
            todo = [dev for address, dev in near.items()
                    if devs.get(address) is dev]
        for dev in todo:          # _refresh changes no entry of devs
            self._refresh(dev)

    def _settle_near(self, touched):
        """After a sync that only removed free devices (and flagged busy
        ones missing): the relatives of the removed devices and the kept
        ones get their free status derived again and go where it says in
        the pools. Nothing else can have changed: a free device's status
        follows from its relatives in use, and only these devices lost
        relatives. Work proportional to the change, not to the host."""
        near = {d.address: d for d in touched
                if self._devs.get(d.address) is d}
        for dev in near.values():
            if dev.status in Status.FREE:
                status = device_table.derived_status(dev)
                if status != dev.status:
                    dev.status = status
                    self._touch(dev)
            self._refresh(dev)

    def _whitelisted(self, records):
        """``{address: (record, tags)}`` of the records the whitelist
        matches, addresses normalised; ``{address: None}`` for a record
        equal to the one applied last at that address when the whitelist
        is ``pure`` (its answer is then the same, and a missing device has
        no record applied: nothing to look at). The records one spec
        matches share one tags dict: the tracker never changes a tags
        dict in place."""
        seen = {}
        applied = self._applied if self._pure else {}
        tags_of = {}            # id(spec) -> (spec, its tags): shared
        for record in records:
            try:
                last = applied.get(record['address'])
            except (KeyError, TypeError):
                last = None     # _record_address says what is wrong
            if last is not None and last == record:
                seen[last['address']] = None
                continue
            address = _record_address(record)
            spec = self._whitelist.match(record)
            if spec is None:
                held = self._devs.get(address)
                if (held is not None and held.status in Status.BUSY
                        and held_back.moves(held, record)):
                    # Not offered as it is listed (an mdev of a type its
                    # parent does not expose), but held: where it is.
                    seen[address] = (dict(record, address=address), None)
                continue
            if record['address'] != address:
                record = dict(record, address=address)
            known = tags_of.get(id(spec))
            if known is None:
                known = tags_of[id(spec)] = (spec, dict(spec.tags or {}))
            seen[address] = (record, known[1])
        return seen

    def _drop_unseen(self, seen):
        """Forget free devices the host no longer lists; flag busy ones
        missing. Returns ``(removed, kept)`` addresses, the relatives of
        the removed devices and the removed devices (still linked)."""
        removed, kept, relatives, gone = [], [], [], []
        for dev in [d for a, d in self._devs.items() if a not in seen]:
            if dev.status in Status.BUSY:
                if not device_table.is_missing(dev):
                    self._set_missing(dev, True)
                    # Applied again when it reappears.
                    self._applied.pop(dev.address, None)
                elif held_back.listed_nowhere(dev) is not None:
                    dev.extra_info = held_back.listed_nowhere(dev)
                    self._touch(dev)
                kept.append(dev.address)
            else:
                relatives.extend(dev.ancestors() + dev.descendants())
                self._forget(dev, unlink=False)
                removed.append(dev.address)
                gone.append(dev)
        return removed, kept, relatives, gone

    def _apply(self, seen, new):
        """Add ``new`` devices, update the others from their records
        (skipping records already applied; devices in use that a record
        would move are held in place, :mod:`.held_back`). Returns
        ``(added, updated, retagged, held in place)`` addresses."""
        added, updated, retagged, moved = [], [], [], []
        fresh = set()
        devs, all_tags, applied = self._devs, self._tags, self._applied
        touched = self._changed        # what _touch fills
        for address, entry in seen.items():
            if entry is None:
                continue        # the steady state: nothing to look at
            record, tags = entry
            dev = new.get(address)
            if dev is not None:
                devs[address], all_tags[address] = dev, tags
                applied[address] = record
                touched[address] = dev
                added.append(address)
                continue
            dev = self._devs[address]
            if dev.status in Status.BUSY and held_back.moves(dev, record):
                moved.append((dev, record))
                continue
            if self._tags.get(address) != tags:
                self._tags[address] = tags
                retagged.append(address)
            missing = device_table.is_missing(dev)
            if self._applied.get(address) == record and not missing:
                continue
            if missing:
                self._set_missing(dev, False)
            changed = dev.update_device(record) or missing
            self._applied[address] = record
            fresh.add(address)
            if changed:
                self._touch(dev)
                updated.append(address)
        for dev, _record in moved:
            self._applied.pop(dev.address, None)    # examined every sync
        updated.extend(self._held_back.hold(self._devs, moved, seen, fresh,
                                            self._touch))
        return added, updated, retagged, [dev.address for dev, _ in moved]

    def _tags_of(self, dev):
        # None (not whitelisted) keeps a device out of the pools.
        return self._tags.get(dev.address)

    def _refresh(self, dev):
        """Put ``dev`` where its status says: in a pool iff available
        (a parent's slots still to create in their pool while usable).

        ``add_device`` is idempotent and keyed by address: it moves a
        device between pools (and to the busy set) as its fields, tags and
        status change.
        """
        self.stats.add_device(dev)
        if self._slot_factory is not None and dev.dev_type == _MDEV_PF:
            count = capacity.usable(dev) if self._tags.get(
                dev.address) is not None else 0
            tags = self._creatable_tags(dev) if count else None
            self.stats.set_creatable(dev, count, tags)

    def _creatable_tags(self, parent):
        """The device-spec tags of the slots ``parent`` can still create
        (None: no spec covers them).

        Remembered per parent when the whitelist is ``pure`` and the slot
        factory names the parent fields its ``prototype`` reads
        (``prototype_fields``): while those hold the same values the
        prototype, and so the whitelist's answer, is the same (a claim or
        free of a slot refreshes its parent, whose count changed).
        """
        names = getattr(self._slot_factory, 'prototype_fields', None)
        key = None
        if self._pure and names is not None:
            key = parent.stored_values(names)
            known = self._slot_tags.get(parent.address)
            if known is not None and known[0] == key:
                return known[1]
        spec = self._whitelist.match(self._slot_factory.prototype(parent))
        tags = None if spec is None else dict(spec.tags or {})
        if key is not None:
            self._slot_tags[parent.address] = (key, tags)
        return tags

    def _forget(self, dev, unlink):
        """Remove a free device from the tracker (and later the store).

        ``unlink`` detaches it from its relatives now; a caller that
        relinks everything afterwards passes False to stay linear.
        """
        self.stats.remove_device(dev)
        dev.remove()
        del self._devs[dev.address]
        self._tags.pop(dev.address, None)
        self._applied.pop(dev.address, None)
        self._slot_tags.pop(dev.address, None)
        self._deleted.add(dev.address)
        if unlink:
            parent = dev.parent_device
            if parent is not None:
                parent.child_devices = [c for c in parent.child_devices
                                        if c is not dev]
            for child in dev.child_devices:
                child.parent_device = None
            dev.parent_device = None
            dev.child_devices = []


def _record_address(record):
    try:
        address = record['address']
    except KeyError:
        raise exception.InvalidValue(
            field='address', value=record,
            rule='a device record needs an address')
    return names.normalize_address(address)
