"""The state machine of :class:`.pci_device.PciDevice` (a mixin): walks
over relatives, checks, and the transitions claim / allocate / free /
remove / mark_deleted (the status invariants are in the docstring of
:mod:`.pci_device`).

Each transition walks the device's ancestors and descendants once and
uses the lists for its checks and its changes: checking and setting
statuses change no link (``parent_device`` / ``child_devices``), and a
status a transition sets is never ``removed`` / ``deleted``, the only
ones :meth:`StateMachine._present_children` leaves out.
"""

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields

Status = fields.PciDeviceStatus

#: A parent in one of these may have a child used.
_PARENT_OK = (Status.AVAILABLE, Status.UNCLAIMABLE, Status.UNAVAILABLE)
_GONE = frozenset(Status.GONE)


class StateMachine(object):
    """Transitions of a device linked to its relatives."""

    def _present_children(self):
        return [c for c in self.child_devices if c.status not in Status.GONE]

    def _ancestors(self):
        """Parent, grandparent... nearest first (a PF above a VF parent
        above an mdev slot: three levels). A cycle of links ends the walk
        (each device once, by identity)."""
        parent = self.parent_device
        if parent is None:
            return []
        found = []
        seen = {id(self)}
        while parent is not None and id(parent) not in seen:
            found.append(parent)
            seen.add(id(parent))
            parent = parent.parent_device
        return found

    def _descendants(self):
        """Present children, grandchildren... (each once, by identity;
        linear in the devices below)."""
        todo = self._present_children()
        if not todo:
            return todo
        found = []
        seen = {id(self)}
        while todo:
            dev = todo.pop()
            if id(dev) in seen:
                continue
            seen.add(id(dev))
            found.append(dev)
            if dev.child_devices:
                todo.extend(dev._present_children())
        return found

    def _expect(self, statuses):
        if self.status not in statuses:
            raise exception.PciDeviceInvalidStatus(
                address=self.address, status=self.status,
                hopestatus=statuses)

    def _check_owner(self, instance_uuid):
        if instance_uuid is not None and self.instance_uuid != instance_uuid:
            raise exception.PciDeviceInvalidOwner(
                address=self.address, owner=self.instance_uuid,
                hopeowner=instance_uuid)

    def _check_children_free(self, below, tolerated=()):
        """``below``: this device's :meth:`_descendants`."""
        busy = [c for c in below
                if c.status != Status.AVAILABLE and c.status not in tolerated]
        if busy:
            raise exception.PciDeviceChildrenBusy(
                address=self.address,
                children=', '.join('%s (%s)' % (c.address, c.status)
                                   for c in busy))

    def _check_parent_usable(self, above):
        """``above``: this device's :meth:`_ancestors`."""
        for parent in above:
            if parent.status not in _PARENT_OK:
                raise exception.PciDeviceParentBusy(
                    address=self.address, parent_addr=parent.address,
                    status=parent.status, hopestatus=_PARENT_OK)

    def claim(self, instance_uuid):
        """``available`` -> ``claimed`` for ``instance_uuid``.

        Every descendant must be free (they become ``unclaimable``), no
        ancestor may be in use (the free ones become ``unclaimable``).
        Returns ``(descendants, ancestors)`` (the relatives, walked once:
        checking and setting change no link).
        """
        self._expect((Status.AVAILABLE,))
        below, above = self._descendants(), self._ancestors()
        if below:
            self._check_children_free(below)
        self._check_parent_usable(above)
        for dev in below:
            dev.status = Status.UNCLAIMABLE
        for parent in above:
            if parent.status == Status.AVAILABLE:
                parent.status = Status.UNCLAIMABLE
        self.status = Status.CLAIMED
        self.instance_uuid = instance_uuid
        return below, above

    def allocate(self, instance_uuid):
        """``available``/``claimed`` (by the same owner) -> ``allocated``;
        descendants and ancestors become ``unavailable``."""
        self._expect((Status.AVAILABLE, Status.CLAIMED))
        if self.status == Status.CLAIMED:
            self._check_owner(instance_uuid)
        below, above = self._descendants(), self._ancestors()
        self._check_children_free(below, tolerated=(Status.UNCLAIMABLE,))
        self._check_parent_usable(above)
        for dev in below + above:
            dev.status = Status.UNAVAILABLE
        self.status = Status.ALLOCATED
        self.instance_uuid = instance_uuid

    def free(self, instance_uuid=None):
        """``claimed``/``allocated`` -> ``available``.

        Returns every device that became available: this one, its
        descendants, and each ancestor once nothing below it is in use
        (an ancestor with only claims left below it is ``unclaimable``).
        """
        self._expect((Status.CLAIMED, Status.ALLOCATED))
        self._check_owner(instance_uuid)
        return self._free()[0]

    def _free(self):
        """:meth:`free` after its checks: ``(freed, descendants,
        ancestors)``, the relatives walked once (setting statuses changes
        no link)."""
        freed = [self]
        self.status = Status.AVAILABLE
        self.instance_uuid = None
        self.request_id = None
        below, above = self._descendants(), self._ancestors()
        for dev in below:
            dev.status = Status.AVAILABLE
            freed.append(dev)
        for parent in above:
            status = parent.status
            if status != Status.UNCLAIMABLE and status != Status.UNAVAILABLE:
                continue
            status = _held_below(parent)
            if status == Status.AVAILABLE:
                freed.append(parent)
            parent.status = status      # recorded as changed, even if same
        return freed, below, above

    def remove(self):
        """A free device vanished from the host: -> ``removed``."""
        self._expect((Status.AVAILABLE, Status.UNCLAIMABLE,
                      Status.UNAVAILABLE))
        if self.instance_uuid is not None:
            raise exception.PciDeviceInvalidOwner(
                address=self.address, owner=self.instance_uuid,
                hopeowner=None)
        self.status = Status.REMOVED
        self.instance_uuid = None
        self.request_id = None

    def mark_deleted(self):
        """A removed device was forgotten by the store: -> ``deleted``."""
        self._expect((Status.REMOVED,))
        self.status = Status.DELETED


def _held_below(parent):
    """The status a free ``parent`` gets from its descendants in use: the
    answer of ``{d.status for d in parent._descendants()}``, read in one
    pass (each status once; a device met twice, or the parent itself
    through a cycle of links, is free and changes nothing)."""
    held = Status.AVAILABLE
    todo = [parent]
    seen = {id(parent)}
    while todo:
        for dev in todo.pop().child_devices:
            status = dev.status
            if status in _GONE:
                continue
            if status == Status.ALLOCATED:
                return Status.UNAVAILABLE
            if status == Status.CLAIMED:
                held = Status.UNCLAIMABLE
            if dev.child_devices and id(dev) not in seen:
                seen.add(id(dev))
                todo.append(dev)
    return held
