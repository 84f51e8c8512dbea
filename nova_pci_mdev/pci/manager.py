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

The tracker has a :class:`.device_table.DeviceTable` (the devices by
address, their tags, owners, links and change log); it syncs it from the
host, claims and frees its devices (all or nothing: devices are claimed
one by one and undone in reverse when one fails, slots made for the claim
are forgotten again), and keeps the pools (``stats``) where each device's
status says. The ``request_id`` of a device is set in
:meth:`PciDevTracker._claim_all` and nowhere else.

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
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import held_back
from nova_pci_mdev.pci import stats as pci_stats

Status = fields.PciDeviceStatus
_MDEV_PF = fields.PciDeviceType.MDEV_PF


class SyncReport(typing.NamedTuple):
    """What one :meth:`PciDevTracker.sync` did, as tuples of addresses."""

    added: tuple
    updated: tuple
    removed: tuple
    kept: tuple


class PciDevTracker(object):
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
        self._table = device_table.DeviceTable()
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
            self._table.devs[dev.address] = dev
        for dev in list(self._table.devs.values()):
            spec = whitelist.match(dev)
            if spec is not None:
                self._table.tags[dev.address] = dict(spec.tags or {})
            elif dev.status in Status.BUSY:
                if not device_table.is_missing(dev):
                    self._table.set_missing(dev, True)
            else:
                self._forget(dev, unlink=False)
                continue
            if dev.status in Status.BUSY and dev.instance_uuid:
                self._table.index_add(dev.instance_uuid, dev.address)
        self._table.relink()
        self._table.normalise()
        for dev in self._table.devs.values():
            self._refresh(dev)

    # -- read access (the device table's) -----------------------------------

    @property
    def devices(self):
        """Read-only mapping address -> :class:`PciDevice`."""
        return self._table.devices

    def devices_of(self, instance_uuid):
        """The devices ``instance_uuid`` holds (see
        :meth:`.device_table.DeviceTable.devices_of`)."""
        return self._table.devices_of(instance_uuid)

    def instances(self):
        """Uuids of the instances that hold at least one device."""
        return self._table.instances()

    def tags_of(self, dev):
        """The device-spec tags of a tracked device ({} if unknown)."""
        return self._table.tags_of(dev)

    def pop_changes(self):
        """``(changed devices, deleted addresses)`` since the last call."""
        return self._table.pop_changes()

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
               if entry is not None and address not in self._table.devs}
        removed, kept, touched, gone = self._drop_unseen(seen)
        added, updated, retagged, held = self._apply(seen, new)
        kept.extend(held)
        touched.extend(self._table.devs[a] for a in kept)
        if added or updated or retagged:
            devs = self._table.devs
            touched.extend(devs[a] for a in added + updated + retagged)
            self._table.relink()
            self._settle(touched)
        elif removed:
            self._table.unlink_gone(gone)
            self._settle_near(touched)
        return SyncReport(tuple(added), tuple(updated), tuple(removed),
                          tuple(kept))

    def _settle(self, touched):
        """After a relink: every free status derived again, and the
        devices ``touched`` (with their relatives, and whatever status
        changed) put in the pools where they belong."""
        changed = self._table.normalise()
        devs = self._table.devs
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
                if self._table.devs.get(d.address) is d}
        for dev in near.values():
            if dev.status in Status.FREE:
                status = device_table.derived_status(dev)
                if status != dev.status:
                    dev.status = status
                    self._table.touch(dev)
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
        applied = self._table.applied if self._pure else {}
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
                held = self._table.devs.get(address)
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
        for dev in [d for a, d in self._table.devs.items() if a not in seen]:
            if dev.status in Status.BUSY:
                if not device_table.is_missing(dev):
                    self._table.set_missing(dev, True)
                    # Applied again when it reappears.
                    self._table.applied.pop(dev.address, None)
                elif held_back.listed_nowhere(dev) is not None:
                    dev.extra_info = held_back.listed_nowhere(dev)
                    self._table.touch(dev)
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
        table = self._table
        devs, all_tags, applied = table.devs, table.tags, table.applied
        touched = self._table.changed        # what touch() fills
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
            dev = self._table.devs[address]
            if dev.status in Status.BUSY and held_back.moves(dev, record):
                moved.append((dev, record))
                continue
            if self._table.tags.get(address) != tags:
                self._table.tags[address] = tags
                retagged.append(address)
            missing = device_table.is_missing(dev)
            if self._table.applied.get(address) == record and not missing:
                continue
            if missing:
                self._table.set_missing(dev, False)
            changed = dev.update_device(record) or missing
            self._table.applied[address] = record
            fresh.add(address)
            if changed:
                self._table.touch(dev)
                updated.append(address)
        for dev, _record in moved:
            self._table.applied.pop(dev.address, None)    # examined every sync
        updated.extend(self._held_back.hold(
            self._table.devs, moved, seen, fresh, self._table.touch))
        return added, updated, retagged, [dev.address for dev, _ in moved]

    def _tags_of(self, dev):
        # None (not whitelisted) keeps a device out of the pools.
        return self._table.tags.get(dev.address)

    def _refresh(self, dev):
        """Put ``dev`` where its status says: in a pool iff available
        (a parent's slots still to create in their pool while usable).

        ``add_device`` is idempotent and keyed by address: it moves a
        device between pools (and to the busy set) as its fields, tags and
        status change.
        """
        self.stats.add_device(dev)
        if self._slot_factory is not None and dev.dev_type == _MDEV_PF:
            count = capacity.usable(dev) if self._table.tags.get(
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
        del self._table.devs[dev.address]
        self._table.tags.pop(dev.address, None)
        self._table.applied.pop(dev.address, None)
        self._slot_tags.pop(dev.address, None)
        self._table.deleted.add(dev.address)
        if unlink:
            parent = dev.parent_device
            if parent is not None:
                parent.child_devices = [c for c in parent.child_devices
                                        if c is not dev]
            for child in dev.child_devices:
                child.parent_device = None
            dev.parent_device = None
            dev.child_devices = []

    # -- claims ------------------------------------------------------------

    def claim_instance(self, instance_uuid, requests, numa_cells=None):
        """Claim devices that fit ``requests`` (InstancePCIRequest list).

        The pools pick the devices (NUMA policy against ``numa_cells``, the
        host cells the instance runs on, or None); each device gets the
        ``request_id`` of the request it serves (set here, in
        :meth:`_claim_all`, and nowhere else). Raises
        :class:`~nova_pci_mdev.exception.PciDeviceRequestFailed` naming
        every request that cannot be met; then nothing has changed.
        """
        requests = list(requests or ())
        if not requests:
            return []
        self._made = []
        try:
            picks = self.stats.take_requests(requests, numa_cells)
        except Exception:
            self._unmake()
            raise
        devs = [dev for _request, dev in picks]
        family = device_table.family(devs)
        try:
            self._claim_all(instance_uuid, [(dev, request.request_id)
                                            for request, dev in picks])
        except Exception:
            self._unmake()
            # take_requests took these (and their relatives) out of the
            # pools: each goes back where its status says.
            for dev in family:
                self._refresh(dev)
            raise
        stale = _stale_after_claim(devs, self._made)
        for dev in family:
            if id(dev) in stale:
                self._refresh(dev)
        changed = self._table.changed         # what touch() fills
        for dev in family:
            changed[dev.address] = dev
        return devs

    def claim_devices(self, instance_uuid, addresses, request_id=None):
        """Claim the devices at ``addresses`` (all or none).

        Devices ``instance_uuid`` already holds are accepted as they are,
        so a retried claim succeeds. Raises PciDeviceNotFound for an
        unknown address, and the device's own error (invalid status or
        owner, busy relative) for a device that cannot be claimed; then
        nothing has changed.
        """
        devs = {}
        for address in addresses:
            address = names.normalize_address(address)
            dev = self._table.devs.get(address)
            if dev is None:
                raise exception.PciDeviceNotFound(address=address)
            devs[address] = dev
        todo = [(dev, request_id) for dev in devs.values()
                if not (dev.status in Status.BUSY and
                        dev.instance_uuid == instance_uuid)]
        self._claim_all(instance_uuid, todo)
        family = device_table.family([dev for dev, _rid in todo])
        for dev in family:
            self._refresh(dev)
            self._table.touch(dev)
        return list(devs.values())

    def claim_slots(self, instance_uuid, parent_address, count,
                    request_id=None):
        """Claim ``count`` slots of one parent (the Placement path):
        its free slots first (existing mdevs, then by UUID), then slots
        still to create, made now. All or none: PciDeviceRequestFailed
        when the parent has fewer than ``count`` free."""
        parent = self._table.devs.get(names.normalize_address(parent_address))
        # An mdev parent, or the PF of an NVIDIA GPU exposing a vGPU type
        # (its slots are its VFs of that type; it has none to create).
        if parent is None or not (
                parent.dev_type == fields.PciDeviceType.MDEV_PF or (
                    parent.dev_type == fields.PciDeviceType.SRIOV_PF
                    and parent.mdev_type)):
            raise exception.PciDeviceNotFound(address=parent_address)
        free = allocation.free_slots(self, parent)[:count]
        missing = count - len(free)
        if missing > capacity.usable(parent):
            raise exception.PciDeviceRequestFailed(
                reason='parent %s has %d free %s slot(s), %d requested'
                % (parent.address, len(free) + capacity.usable(parent),
                   parent.mdev_type, count))
        self._made = []
        try:
            new = self._materialise(parent, missing) if missing else []
            return self.claim_devices(
                instance_uuid, [d.address for d in free + new], request_id)
        except Exception:
            self._unmake()
            raise

    def _claim_all(self, instance_uuid, pairs):
        """Claim each (device, request_id); undo them all if one fails."""
        done = []
        try:
            for dev, request_id in pairs:
                dev.claim(instance_uuid)
                dev.request_id = request_id
                done.append(dev)
                self._table.index_add(instance_uuid, dev.address)
        except Exception:
            for dev in reversed(done):
                dev.free(instance_uuid)
                self._table.index_discard(instance_uuid, dev.address)
            raise

    def allocate_instance(self, instance_uuid):
        """``claimed`` -> ``allocated`` for every device of the instance.

        Returns the devices this call allocated ([] when there is nothing
        left to allocate, so a repeated call is a no-op).
        """
        done = []
        for address in self._table.by_instance.get(instance_uuid, ()):
            dev = self._table.devs[address]
            if dev.status == Status.CLAIMED:
                dev.allocate(instance_uuid)
                done.append(dev)
        for dev in device_table.family(done):
            self._refresh(dev)
            self._table.touch(dev)
        return done

    def transfer(self, old_owner, new_owner):
        """Give every device ``old_owner`` holds to ``new_owner`` as it is:
        status, request ids and relatives unchanged, so nothing is free in
        between (a confirmed move: the migration's claim becomes the
        instance's). ``new_owner`` must hold nothing. Returns the devices.
        """
        if self._table.by_instance.get(new_owner):
            raise exception.InvalidValue(
                field='instance', value=new_owner,
                rule='already holds devices; a transfer needs a new owner')
        moved = [self._table.devs[address]
                 for address in self._table.by_instance.pop(old_owner, ())]
        for dev in moved:
            dev.instance_uuid = new_owner
            self._table.index_add(new_owner, dev.address)
            self._table.touch(dev)
        return moved

    # -- slots still to create ---------------------------------------------

    def _materialise(self, parent, count):
        """``count`` new, available slot devices of ``parent``, tracked
        and linked; the parent's count drops by as many. Undone by
        :meth:`_unmake` when the claim fails."""
        if self._slot_factory is None or count > capacity.creatable(parent):
            raise exception.PciDeviceRequestFailed(
                reason='parent %s cannot create %d more %s slot(s)'
                % (parent.address, count, parent.mdev_type))
        new = []
        for record in self._slot_factory.records(parent, self._table.devs,
                                                 count):
            dev = pci_device.PciDevice.create(
                record, names.normalize_address(record['address']))
            spec = self._whitelist.match(record)
            self._table.devs[dev.address] = dev
            self._table.tags[dev.address] = (
                dict(spec.tags or {}) if spec else {})
            dev.parent_device = parent
            dev.child_devices = []
            parent.child_devices.append(dev)
            self._table.touch(dev)
            new.append(dev)
        parent.extra_info = capacity.with_creatable(
            parent.extra_info, capacity.creatable(parent) - len(new))
        self._table.touch(parent)
        self._made.append((parent, new))
        return new

    def _unmake(self):
        """Forget the slots :meth:`_materialise` made for a failed claim
        and give their parents the count back."""
        made, self._made = self._made, []
        for parent, new in reversed(made):
            for dev in new:
                self._forget(dev, unlink=True)
                self._table.changed.pop(dev.address, None)
                self._table.deleted.discard(dev.address)
            parent.extra_info = capacity.with_creatable(
                parent.extra_info, capacity.creatable(parent) + len(new))
            self._refresh(parent)

    # -- frees -------------------------------------------------------------

    def free_instance(self, instance_uuid):
        """Free every device the instance holds (claimed or allocated).

        Freed devices and the relatives they release go back to the pools;
        a freed device that was missing from the host is deleted. Returns
        the freed devices ([] for an instance that holds nothing).
        """
        freed = []
        for address in list(self._table.by_instance.get(instance_uuid, ())):
            dev = self._table.devs[address]
            freed.extend(self._release(dev, instance_uuid))
        return freed

    def free_device(self, dev, instance_uuid):
        """Free one device (a PciDevice or an address) held by the instance.

        A device that is unknown, free, or held by another instance is left
        alone; the call then returns [], else ``[device]``.
        """
        address = dev if isinstance(dev, str) else dev.address
        tracked = self._table.devs.get(address)
        if tracked is None:
            return []
        return self._release(tracked, instance_uuid)

    def _release(self, dev, instance_uuid):
        if dev.status not in Status.BUSY or dev.instance_uuid != instance_uuid:
            self._table.index_discard(instance_uuid, dev.address)
            return []
        freed = dev.free(instance_uuid)
        below, above = dev.descendants(), dev.ancestors()
        self._table.index_discard(instance_uuid, dev.address)
        family = _family(dev, above, below)
        changed = self._table.changed         # what touch() fills
        for relative in family:
            changed[relative.address] = relative
        if device_table.is_missing(dev):
            self._forget(dev, unlink=True)
        # Only what became available moves in the pools; an ancestor
        # still blocked by another claim stays busy where it is, and its
        # count of slots to create is unchanged (it is not itself in use).
        moved = {id(d) for d in freed}
        devs = self._table.devs
        for relative in family:
            if id(relative) in moved and devs.get(relative.address) is (
                    relative):
                self._refresh(relative)
        return [dev]


def _record_address(record):
    try:
        address = record['address']
    except KeyError:
        raise exception.InvalidValue(
            field='address', value=record,
            rule='a device record needs an address')
    return names.normalize_address(address)


def _family(dev, above, below):
    """:func:`.device_table.family` of ``[dev]`` from its walks (``above``
    its ancestors, ``below`` its descendants): same devices, same order."""
    out = {dev.address: dev}
    for relative in above + below:
        out[relative.address] = relative
    return list(out.values())


def _stale_after_claim(devs, made):
    """Ids of the devices of a successful claim of ``devs`` whose place in
    the pools is not already right; the tracker refreshes only these.

    The plan blocked every other device of the family: the commit made it
    busy in its pool, and the claim left it in use or unclaimable, so
    ``add_device`` would keep it where it is (its key fields did not
    change). Its count of slots to create (``set_creatable``) changes only
    if it is an mdev parent that is now claimed itself or below a claimed
    device, or a parent that made slots (``made``: ``(parent, new slots)``
    of this claim); the new slots are in no pool yet. The property tests
    compare the pools with pools rebuilt from scratch after every step.
    """
    stale = set()
    for parent, new in made:
        stale.add(id(parent))
        stale.update(id(slot) for slot in new)
    for dev in devs:
        below = dev.descendants() if dev.child_devices else []
        for each in [dev] + below:
            if each.dev_type == _MDEV_PF:
                stale.add(id(each))
    return stale
