"""An allocation never moves: slots in use that the host lists elsewhere.

After a reboot an mdev may come back under another parent (another GPU,
another NUMA node) or with another type. The instance was given that slot
on its parent, with its NUMA node and type, and the promise is the same
UUID on the same parent; so a sync of the tracker (:mod:`.manager`) never
takes such a record:

* the slot keeps its parent, NUMA node and type, and is flagged
  ``missing`` (its mdev does not run where it is held), with
  ``extra_info['listed_under']`` saying where the host lists it; the sync
  reports it ``kept``, ``restore`` refuses to move it and ``devices``
  names both places;
* its parent keeps one available instance per such slot, as for a
  vanished held mdev (the host counts that instance free: the mdev is to
  be created there again), so nobody else is offered it.

Once the slot is back on its parent its record is applied as usual (the
flags go), and once it is freed it is forgotten and the next sync follows
the host. Pure: reads and writes devices and ``extra_info`` dicts only.
"""

from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity


def moves(dev, record):
    """Whether ``record`` puts device ``dev`` under another parent, or
    gives a slot another mdev type."""
    if record.get('parent_addr') != dev.parent_addr:
        return True
    return (dev.dev_type == fields.PciDeviceType.MDEV_VF
            and record.get('mdev_type') != dev.mdev_type)


def listed_nowhere(dev):
    """A copy of ``dev``'s extra_info without ``listed_under``, or None
    when it has none (the host lists the slot nowhere now)."""
    extra = dev.extra_info or {}
    if extra_info.LISTED_UNDER not in extra:
        return None
    return {k: v for k, v in extra.items() if k != extra_info.LISTED_UNDER}


class HeldBack(object):
    """The instances parents keep for their slots listed elsewhere.

    ``lowered`` remembers by how much each parent's count was lowered
    since its record was last applied, so that a parent whose record did
    not change is neither lowered twice nor left lowered once its slot is
    back or freed.
    """

    def __init__(self):
        self.lowered = {}       # parent address -> count held back

    def hold(self, devs, moved, seen, fresh, touch):
        """Hold ``moved`` (``[(device, record)]`` of one sync) in place.

        ``devs``: address -> tracked device; ``seen``: the addresses the
        host lists now; ``fresh``: those whose record this sync applied
        (their count is the host's); ``touch(dev)`` records a change.
        Returns the addresses of the parents whose count changed.
        """
        want = {}
        for dev, record in moved:
            extra = dict(dev.extra_info or {})
            extra[extra_info.MISSING] = extra_info.TRUE
            extra[extra_info.MDEV_EXISTS] = extra_info.FALSE
            extra[extra_info.LISTED_UNDER] = '%s %s' % (
                record.get('parent_addr'), record.get('mdev_type'))
            if extra != dev.extra_info:
                dev.extra_info = extra
                touch(dev)
            parent = devs.get(dev.parent_addr or '')
            if parent is not None and dev.mdev_type == parent.mdev_type:
                want[parent.address] = want.get(parent.address, 0) + 1
        changed = []
        lowered = self.lowered
        for address in set(want) | set(lowered):
            before = lowered.pop(address, 0)
            parent = devs.get(address)
            if parent is None or address not in seen:
                continue
            host = capacity.creatable(parent) + (
                0 if address in fresh else before)
            target = max(0, host - want.get(address, 0))
            if target != capacity.creatable(parent):
                parent.extra_info = capacity.with_creatable(
                    parent.extra_info, target)
                touch(parent)
                changed.append(address)
            if host > target:
                lowered[address] = host - target
        return changed
