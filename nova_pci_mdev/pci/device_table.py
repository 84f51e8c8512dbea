"""The tracker's table of devices: links, owners and the change log.

:class:`DeviceTable` is the state :class:`.manager.PciDevTracker` keeps, and
the bookkeeping on it that has no policy: devices by address, their
device-spec tags, the per-instance index of owners, parent/child links
rebuilt in one pass, free statuses derived from the relatives, and the
changes since the store last saved. Pure, no I/O; linear in the devices
it touches (dicts and sets keyed by address).
"""

import types

from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields

Status = fields.PciDeviceStatus


def is_missing(dev):
    """True if ``dev`` is in use but no longer on the host / whitelisted."""
    return extra_info.is_true(dev.extra_info, extra_info.MISSING)


def listed_under(dev):
    """``(parent address, mdev type)`` the host lists a slot in use under
    when that is not where its claim holds it (see :mod:`.manager`), else
    None."""
    value = (dev.extra_info or {}).get(extra_info.LISTED_UNDER)
    if not value:
        return None
    parent, _, mdev_type = value.partition(' ')
    return parent, mdev_type or None


def derived_status(dev):
    """The status a free ``dev`` must have, given its relatives: any
    ancestor in use blocks it, else any descendant in use does (allocated
    before claimed). Links nest: PF -> mdev-capable VF -> slot."""
    for relatives in (dev.ancestors(), dev.descendants()):
        statuses = {r.status for r in relatives}
        if Status.ALLOCATED in statuses:
            return Status.UNAVAILABLE
        if Status.CLAIMED in statuses:
            return Status.UNCLAIMABLE
    return Status.AVAILABLE


def family(devs):
    """``devs`` with their ancestors and descendants, once each."""
    out = {}
    for dev in devs:
        out[dev.address] = dev
        for relative in dev.ancestors() + dev.descendants():
            out[relative.address] = relative
    return list(out.values())


class DeviceTable(object):
    """Devices by address with their tags, owners, links and changes."""

    def __init__(self):
        self.devs = {}            # address -> PciDevice
        self.tags = {}            # address -> device-spec tags
        self.by_instance = {}     # instance uuid -> {address: None}
        self.changed = {}         # address -> PciDevice, since pop_changes
        self.deleted = set()      # addresses, since pop_changes
        self.applied = {}         # address -> last record synced in

    # -- read access -------------------------------------------------------

    @property
    def devices(self):
        """Read-only mapping address -> :class:`PciDevice`."""
        return types.MappingProxyType(self.devs)

    def devices_of(self, instance_uuid):
        """The devices ``instance_uuid`` holds.

        In the order it got them; after a reload, in the store's order.
        """
        return [self.devs[address]
                for address in self.by_instance.get(instance_uuid, ())]

    def instances(self):
        """Uuids of the instances that hold at least one device."""
        return list(self.by_instance)

    def tags_of(self, dev):
        """The device-spec tags of a tracked device ({} if unknown)."""
        return dict(self.tags.get(dev.address) or {})

    # -- changes for the store ---------------------------------------------

    def pop_changes(self):
        """``(changed devices, deleted addresses)`` since the last call."""
        changed = [dev for address, dev in self.changed.items()
                   if self.devs.get(address) is dev]
        deleted = sorted(a for a in self.deleted if a not in self.devs)
        self.changed = {}
        self.deleted = set()
        return changed, deleted

    # -- bookkeeping ---------------------------------------------------------

    def touch(self, dev):
        self.changed[dev.address] = dev

    def set_missing(self, dev, missing):
        extra = dict(dev.extra_info)
        if missing:
            extra[extra_info.MISSING] = extra_info.TRUE
        else:
            extra.pop(extra_info.MISSING, None)
            extra.pop(extra_info.LISTED_UNDER, None)
        dev.extra_info = extra
        self.touch(dev)

    def index_add(self, instance_uuid, address):
        self.by_instance.setdefault(instance_uuid, {})[address] = None

    def index_discard(self, instance_uuid, address):
        held = self.by_instance.get(instance_uuid)
        if held is not None:
            held.pop(address, None)
            if not held:
                del self.by_instance[instance_uuid]

    def relink(self):
        """Rebuild every parent/child link in one pass (a device keeps
        its own list when it is already empty: every device has a list
        of its own, never shared)."""
        for dev in self.devs.values():
            if dev.parent_device is not None:
                dev.parent_device = None
            if dev.child_devices:
                dev.child_devices = []
        for dev in self.devs.values():
            # Children, and parents below a parent (an mdev-capable VF
            # under its PF: three levels).
            if dev.parent_addr is None or dev.parent_addr == dev.address:
                continue
            parent = self.devs.get(dev.parent_addr)
            if parent is not None and parent.is_parent:
                dev.parent_device = parent
                parent.child_devices.append(dev)

    def unlink_gone(self, gone):
        """Detach the forgotten devices ``gone`` from the devices still
        tracked: the links :meth:`relink` would give, at the cost of the
        parents and children of ``gone`` (each parent's list filtered
        once)."""
        ids = {id(dev) for dev in gone}
        parents = {}
        for dev in gone:
            parent = dev.parent_device
            if parent is not None and id(parent) not in ids:
                parents[id(parent)] = parent
            for child in dev.child_devices:
                if child.parent_device is dev:
                    child.parent_device = None
        for parent in parents.values():
            parent.child_devices = [c for c in parent.child_devices
                                    if id(c) not in ids]
        for dev in gone:
            dev.parent_device = None
            dev.child_devices = []

    def normalise(self):
        """Give every free device the status its relatives imply; returns
        the devices whose status changed.

        Only relatives of a device in use can be anything but
        ``available`` (:func:`derived_status`), so those are derived and
        every other free device is simply made ``available``: linear, and
        cheap for the devices no instance is near.
        """
        held = [dev for dev in self.devs.values()
                if dev.status in Status.BUSY]
        near = {dev.address: dev for dev in family(held)}
        changed = []
        for dev in self.devs.values():
            status = dev.status
            if status == Status.AVAILABLE and dev.address not in near:
                continue
            if status not in Status.FREE:
                continue
            new = (derived_status(dev) if dev.address in near
                   else Status.AVAILABLE)
            if new != status:
                dev.status = new
                self.touch(dev)
                changed.append(dev)
        return changed
