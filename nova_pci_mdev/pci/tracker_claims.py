"""Claims and frees of :class:`.manager.PciDevTracker` (a mixin).

Every claim is all or nothing: devices are claimed one by one and undone in
reverse when one fails, slots made for the claim are forgotten again
(``_unmake``), and the pools get every touched device and relative back
where its status says (``_refresh``). The ``request_id`` of a device is set
here, in :meth:`ClaimsMixin._claim_all`, and nowhere else. Frees give the
relatives back to the pools and delete a freed device that left the host.
Slots still to create are made here too (``_materialise``, undone by
``_unmake``). The tracker provides the state
(:class:`.device_table.DeviceTable`), the pools (``stats``), the slot
factory and whitelist, and ``_refresh`` / ``_forget``.
"""

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import device_table

Status = fields.PciDeviceStatus
_MDEV_PF = fields.PciDeviceType.MDEV_PF


class ClaimsMixin(object):
    """Claims, allocation, transfer and frees over the tracker's state."""

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
        changed = self._changed         # what _touch fills
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
            dev = self._devs.get(address)
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
        for dev in device_table.family(done):
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
            dev = pci_device.PciDevice.create(
                record, names.normalize_address(record['address']))
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
        freed = dev.free(instance_uuid)
        below, above = dev.descendants(), dev.ancestors()
        self._index_discard(instance_uuid, dev.address)
        family = _family(dev, above, below)
        changed = self._changed         # what _touch fills
        for relative in family:
            changed[relative.address] = relative
        if device_table.is_missing(dev):
            self._forget(dev, unlink=True)
        # Only what became available moves in the pools; an ancestor
        # still blocked by another claim stays busy where it is, and its
        # count of slots to create is unchanged (it is not itself in use).
        moved = {id(d) for d in freed}
        devs = self._devs
        for relative in family:
            if id(relative) in moved and devs.get(relative.address) is (
                    relative):
                self._refresh(relative)
        return [dev]


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
