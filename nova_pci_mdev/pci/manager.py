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
* Parent/child consistency: ``child.parent_device`` is the tracked parent
  named by ``child.parent_addr`` (when that is a parent type), and the
  parent lists the child once in ``child_devices``. The status of every
  free device follows from its relatives: a child is ``unclaimable`` /
  ``unavailable`` while its parent is claimed / allocated whole; a parent
  is ``unavailable`` while a child is allocated, else ``unclaimable`` while
  a child is claimed; otherwise ``available``.
* Nothing in use is lost: a claimed or allocated device that vanished from
  the host or fell out of the whitelist stays, flagged
  ``extra_info['missing'] = 'true'`` and reported as ``kept`` by every
  sync, until it is freed; then it is deleted. A free device that vanished
  is removed at once; a device that reappears loses its flag.
* A failed claim changes nothing (statuses, owners, pools, pending
  changes).
* Slots still to create (:mod:`.capacity`) are counted on their parent and
  made, with the UUIDs of the ``slot_factory``, only by the claim that
  takes them: the parent's count drops by exactly the slots made, and a
  failed claim forgets them again. Without a ``slot_factory`` such counts
  are not offered.

Cost: every operation is linear in the devices it reads (a sync in the
number of devices and records, a claim or free in the devices of the
instance and their relatives). Lookups are by address in dicts and sets;
devices are compared by identity, never field by field.
"""

import types
import typing

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import stats as pci_stats

Status = fields.PciDeviceStatus


class SyncReport(typing.NamedTuple):
    """What one :meth:`PciDevTracker.sync` did, as tuples of addresses."""

    added: tuple
    updated: tuple
    removed: tuple
    kept: tuple


def is_missing(dev):
    """True if ``dev`` is in use but no longer on the host / whitelisted."""
    return extra_info.is_true(dev.extra_info, extra_info.MISSING)


def _derived_status(dev):
    """The status a free ``dev`` must have, given its relatives."""
    if dev.is_parent:
        status = Status.AVAILABLE
        for child in dev.child_devices:
            if child.status == Status.ALLOCATED:
                return Status.UNAVAILABLE
            if child.status == Status.CLAIMED:
                status = Status.UNCLAIMABLE
        return status
    parent = dev.parent_device
    if parent is not None:
        if parent.status == Status.CLAIMED:
            return Status.UNCLAIMABLE
        if parent.status == Status.ALLOCATED:
            return Status.UNAVAILABLE
    return Status.AVAILABLE


def _family(devs):
    """``devs`` with their parents and children, once each, by address."""
    out = {}
    for dev in devs:
        out[dev.address] = dev
        if dev.parent_device is not None:
            out[dev.parent_device.address] = dev.parent_device
        for child in dev.child_devices:
            out[child.address] = child
    return list(out.values())


class PciDevTracker(object):
    """Devices of one host, their owners and the pools of free ones.

    :param whitelist: an object with ``match(dev) -> spec | None`` where
        ``spec.tags`` is a dict (``pci.whitelist.Whitelist``); ``dev`` is a
        device record dict or a :class:`PciDevice`.
    :param numa_topology: the host's ``numa.HostTopology`` (for the pools).
    :param devices: :class:`PciDevice` objects loaded from a store. They are
        checked against the whitelist like a sync would (a free device that
        is no longer whitelisted is removed, a busy one flagged missing),
        and the free statuses are re-derived from their relatives; whatever
        that changes is reported by :meth:`pop_changes`.
    """

    def __init__(self, whitelist, numa_topology=None, devices=(),
                 slot_factory=None):
        self._whitelist = whitelist
        self._slot_factory = slot_factory
        self._made = []            # (parent, new slots) of the claim
        self._devs = {}            # address -> PciDevice
        self._tags = {}            # address -> device-spec tags
        self._by_instance = {}     # instance uuid -> {address: None}
        self._changed = {}         # address -> PciDevice, since pop_changes
        self._deleted = set()      # addresses, since pop_changes
        self._applied = {}         # address -> last record synced in
        self.stats = pci_stats.PciDeviceStats(
            numa_topology, tags_of=self._tags_of,
            materialise=self._materialise)
        for dev in devices:
            if 'status' not in dev or dev.status in Status.GONE:
                continue
            dev.parent_device = None
            dev.child_devices = []
            self._devs[dev.address] = dev
        for dev in list(self._devs.values()):
            spec = whitelist.match(dev)
            if spec is not None:
                self._tags[dev.address] = dict(spec.tags or {})
            elif dev.status in Status.BUSY:
                if not is_missing(dev):
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

    # -- read access -------------------------------------------------------

    @property
    def devices(self):
        """Read-only mapping address -> :class:`PciDevice`."""
        return types.MappingProxyType(self._devs)

    def devices_of(self, instance_uuid):
        """The devices ``instance_uuid`` holds.

        In the order it got them; after a reload, in the store's order.
        """
        return [self._devs[address]
                for address in self._by_instance.get(instance_uuid, ())]

    def instances(self):
        """Uuids of the instances that hold at least one device."""
        return list(self._by_instance)

    def tags_of(self, dev):
        """The device-spec tags of a tracked device ({} if unknown)."""
        return dict(self._tags.get(dev.address) or {})

    # -- sync from the host ------------------------------------------------

    def sync(self, records):
        """Bring the devices in line with the host's device records.

        Records the whitelist does not match are ignored. Returns a
        :class:`SyncReport`; ``kept`` lists every in-use device that is
        missing from the host (or from the whitelist) after this sync.
        """
        seen = {}
        for record in records:
            address = _record_address(record)
            spec = self._whitelist.match(record)
            if spec is None:
                continue
            if record['address'] != address:
                record = dict(record, address=address)
            seen[address] = (record, dict(spec.tags or {}))

        # Build the new devices first: a record a device cannot hold fails
        # the sync before anything has changed.
        new = {address: pci_device.PciDevice.create(record)
               for address, (record, _tags) in seen.items()
               if address not in self._devs}

        removed, kept = [], []
        for dev in [d for a, d in self._devs.items() if a not in seen]:
            if dev.status in Status.BUSY:
                if not is_missing(dev):
                    self._set_missing(dev, True)
                kept.append(dev.address)
            else:
                self._forget(dev, unlink=False)
                removed.append(dev.address)

        added, updated = [], []
        retagged = False
        for address, (record, tags) in seen.items():
            dev = new.get(address)
            if dev is not None:
                self._devs[address] = dev
                self._tags[address] = tags
                self._applied[address] = record
                self._touch(dev)
                added.append(address)
                continue
            dev = self._devs[address]
            if self._tags.get(address) != tags:
                self._tags[address] = tags
                retagged = True
            if self._applied.get(address) == record and not is_missing(dev):
                continue        # the steady state: nothing to look at
            changed = False
            if is_missing(dev):
                self._set_missing(dev, False)
                changed = True
            changed = dev.update_device(record) or changed
            self._applied[address] = record
            if changed:
                self._touch(dev)
                updated.append(address)

        if added or updated or removed or retagged:
            self._relink()
            self._normalise()
            for dev in self._devs.values():
                self._refresh(dev)
        return SyncReport(tuple(added), tuple(updated), tuple(removed),
                          tuple(kept))

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
        family = _family(devs)
        try:
            self._claim_all(instance_uuid, [(dev, request.request_id)
                                            for request, dev in picks])
        except Exception:
            self._unmake()
            raise
        finally:
            # take_requests took these (and their relatives) out of the
            # pools; put each where its status says (back, on failure).
            for dev in family:
                self._refresh(dev)
        for dev in family:
            self._touch(dev)
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
            dev = self._devs.get(address)
            if dev is None:
                raise exception.PciDeviceNotFound(address=address)
            devs[address] = dev
        todo = [(dev, request_id) for dev in devs.values()
                if not (dev.status in Status.BUSY and
                        dev.instance_uuid == instance_uuid)]
        self._claim_all(instance_uuid, todo)
        family = _family([dev for dev, _rid in todo])
        for dev in family:
            self._refresh(dev)
            self._touch(dev)
        return list(devs.values())

    def claim_slots(self, instance_uuid, parent_address, count,
                    request_id=None):
        """Claim ``count`` slots of one parent (the Placement path):
        its free slots first (existing mdevs, then by UUID), then slots
        still to create, made now. All or none: PciDeviceRequestFailed
        when the parent has fewer than ``count`` free."""
        parent = self._devs.get(names.normalize_address(parent_address))
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
                self._index_add(instance_uuid, dev.address)
        except Exception:
            for dev in reversed(done):
                dev.free(instance_uuid)
                self._index_discard(instance_uuid, dev.address)
            raise

    def allocate_instance(self, instance_uuid):
        """``claimed`` -> ``allocated`` for every device of the instance.

        Returns the devices this call allocated ([] when there is nothing
        left to allocate, so a repeated call is a no-op).
        """
        done = []
        for address in self._by_instance.get(instance_uuid, ()):
            dev = self._devs[address]
            if dev.status == Status.CLAIMED:
                dev.allocate(instance_uuid)
                done.append(dev)
        for dev in _family(done):
            self._refresh(dev)
            self._touch(dev)
        return done

    def transfer(self, old_owner, new_owner):
        """Give every device ``old_owner`` holds to ``new_owner`` as it is:
        status, request ids and relatives unchanged, so nothing is free in
        between (a confirmed move: the migration's claim becomes the
        instance's). ``new_owner`` must hold nothing. Returns the devices.
        """
        if self._by_instance.get(new_owner):
            raise exception.InvalidValue(
                field='instance', value=new_owner,
                rule='already holds devices; a transfer needs a new owner')
        moved = [self._devs[address]
                 for address in self._by_instance.pop(old_owner, ())]
        for dev in moved:
            dev.instance_uuid = new_owner
            self._index_add(new_owner, dev.address)
            self._touch(dev)
        return moved

    # -- frees -------------------------------------------------------------

    def free_instance(self, instance_uuid):
        """Free every device the instance holds (claimed or allocated).

        Freed devices and the relatives they release go back to the pools;
        a freed device that was missing from the host is deleted. Returns
        the freed devices ([] for an instance that holds nothing).
        """
        freed = []
        for address in list(self._by_instance.get(instance_uuid, ())):
            dev = self._devs[address]
            freed.extend(self._release(dev, instance_uuid))
        return freed

    def free_device(self, dev, instance_uuid):
        """Free one device (a PciDevice or an address) held by the instance.

        A device that is unknown, free, or held by another instance is left
        alone; the call then returns [], else ``[device]``.
        """
        address = dev if isinstance(dev, str) else dev.address
        tracked = self._devs.get(address)
        if tracked is None:
            return []
        return self._release(tracked, instance_uuid)

    def _release(self, dev, instance_uuid):
        if dev.status not in Status.BUSY or dev.instance_uuid != instance_uuid:
            self._index_discard(instance_uuid, dev.address)
            return []
        dev.free(instance_uuid)
        self._index_discard(instance_uuid, dev.address)
        family = _family([dev])
        for relative in family:
            self._touch(relative)
        if is_missing(dev):
            self._forget(dev, unlink=True)
        for relative in family:
            if self._devs.get(relative.address) is relative:
                self._refresh(relative)
        return [dev]

    # -- changes for the store ---------------------------------------------

    def pop_changes(self):
        """``(changed devices, deleted addresses)`` since the last call."""
        changed = [dev for address, dev in self._changed.items()
                   if self._devs.get(address) is dev]
        deleted = sorted(a for a in self._deleted if a not in self._devs)
        self._changed = {}
        self._deleted = set()
        return changed, deleted

    # -- internals ---------------------------------------------------------

    def _tags_of(self, dev):
        # None (not whitelisted) keeps a device out of the pools.
        return self._tags.get(dev.address)

    def _touch(self, dev):
        self._changed[dev.address] = dev

    def _set_missing(self, dev, missing):
        extra = dict(dev.extra_info)
        if missing:
            extra[extra_info.MISSING] = extra_info.TRUE
        else:
            extra.pop(extra_info.MISSING, None)
        dev.extra_info = extra
        self._touch(dev)

    def _index_add(self, instance_uuid, address):
        self._by_instance.setdefault(instance_uuid, {})[address] = None

    def _index_discard(self, instance_uuid, address):
        held = self._by_instance.get(instance_uuid)
        if held is not None:
            held.pop(address, None)
            if not held:
                del self._by_instance[instance_uuid]

    def _refresh(self, dev):
        """Put ``dev`` where its status says: in a pool iff available
        (a parent's slots still to create in their pool while usable).

        ``add_device`` is idempotent and keyed by address: it moves a
        device between pools (and to the busy set) as its fields, tags and
        status change.
        """
        self.stats.add_device(dev)
        if (self._slot_factory is not None
                and dev.dev_type == fields.PciDeviceType.MDEV_PF):
            count = capacity.usable(dev) if self._tags.get(
                dev.address) is not None else 0
            tags = None
            if count:
                spec = self._whitelist.match(
                    self._slot_factory.prototype(dev))
                tags = None if spec is None else dict(spec.tags or {})
            self.stats.set_creatable(dev, count, tags)

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
        for record in self._slot_factory.records(parent, self._devs, count):
            dev = pci_device.PciDevice.create(record)
            spec = self._whitelist.match(record)
            self._devs[dev.address] = dev
            self._tags[dev.address] = dict(spec.tags or {}) if spec else {}
            dev.parent_device = parent
            dev.child_devices = []
            parent.child_devices.append(dev)
            self._touch(dev)
            new.append(dev)
        parent.extra_info = capacity.with_creatable(
            parent.extra_info, capacity.creatable(parent) - len(new))
        self._touch(parent)
        self._made.append((parent, new))
        return new

    def _unmake(self):
        """Forget the slots :meth:`_materialise` made for a failed claim
        and give their parents the count back."""
        made, self._made = self._made, []
        for parent, new in reversed(made):
            for dev in new:
                self._forget(dev, unlink=True)
                self._changed.pop(dev.address, None)
                self._deleted.discard(dev.address)
            parent.extra_info = capacity.with_creatable(
                parent.extra_info, capacity.creatable(parent) + len(new))
            self._refresh(parent)

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

    def _relink(self):
        """Rebuild every parent/child link in one pass."""
        for dev in self._devs.values():
            dev.parent_device = None
            dev.child_devices = []
        for dev in self._devs.values():
            if not dev.is_child or dev.parent_addr is None:
                continue
            parent = self._devs.get(dev.parent_addr)
            if parent is not None and parent.is_parent:
                dev.parent_device = parent
                parent.child_devices.append(dev)

    def _normalise(self):
        """Give every free device the status its relatives imply."""
        for dev in self._devs.values():
            if dev.status in Status.FREE:
                status = _derived_status(dev)
                if status != dev.status:
                    dev.status = status
                    self._touch(dev)


def _record_address(record):
    try:
        address = record['address']
    except KeyError:
        raise exception.InvalidValue(
            field='address', value=record,
            rule='a device record needs an address')
    return names.normalize_address(address)
