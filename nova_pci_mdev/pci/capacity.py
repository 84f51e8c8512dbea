"""Slots still to create: counted on their parent, made when claimed.

A parent (``mdev-pf``) that can still create mdevs of its exposed type
carries the number in ``extra_info['creatable']`` (discovery puts it there:
``availableInstances``, less stopped or vanished held mdevs, within the
limits :func:`nova_pci_mdev.virt.libvirt.slots.type_limits` computes: the
``[pci] device_spec`` key ``max_instances`` per parent, ``[mdev_<type>]
max_instances`` per host as in Nova). No slot device exists for those: the
pools count them, the provider tree adds them to the parent's total, and
only a claim turns them into slot devices, through the tracker's
``slot_factory`` (the UUIDs the fixed sequence gives, see
:mod:`nova_pci_mdev.virt.libvirt.slots`); the parent's count drops by as
many. So nothing costs more with
``availableInstances = 2**31`` than with 16 (issue 15, item 1).

Pure: reads and writes ``extra_info`` dicts, no I/O.

A ``slot_factory`` is any object with

* ``prototype(parent) -> record``: the record a new slot of ``parent``
  would have (for whitelist matching: its tags are those of every slot
  still to create);
* ``records(parent, taken, count) -> [record]``: ``count`` new slot records
  whose addresses are not in ``taken`` (a set of tracked addresses);
* optionally ``prototype_fields``: the parent fields ``prototype`` reads;
  with a pure whitelist the tracker then remembers the slots' tags per
  parent while those fields keep their values.
"""

from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields

Status = fields.PciDeviceStatus
DevType = fields.PciDeviceType

#: A stored count longer than this is not ours (and int() of a huge
#: string is slow): it reads as 0.
_MAX_DIGITS = 19
_NOT_USABLE = frozenset((Status.CLAIMED, Status.ALLOCATED, Status.REMOVED,
                         Status.DELETED))


def _extra(dev):
    if isinstance(dev, dict):
        return dev.get('extra_info') or {}
    return dev.stored('extra_info') or {}


def creatable(dev):
    """The slots ``dev`` (a parent device or record) can still create."""
    value = _extra(dev).get(extra_info.CREATABLE)
    if (not isinstance(value, str) or not value.isascii()
            or not value.isdigit() or len(value) > _MAX_DIGITS):
        return 0
    return int(value)


def usable(dev):
    """``creatable(dev)`` while they can be claimed: the parent exposes a
    type and neither it nor an ancestor of it (the PF of an mdev-capable
    VF) is used whole (claimed, allocated) or gone."""
    if (dev.dev_type != DevType.MDEV_PF or not dev.mdev_type
            or dev.status in _NOT_USABLE):
        return 0
    parent = getattr(dev, 'parent_device', None)
    while parent is not None and parent is not dev:
        # A PF used whole takes the slots of its VF parents with it.
        if parent.status in _NOT_USABLE:
            return 0
        parent = parent.parent_device
    return creatable(dev)


def with_creatable(extra, count):
    """A copy of ``extra`` (an extra_info dict) whose count is ``count``
    (removed at 0)."""
    extra = dict(extra or {})
    if count > 0:
        extra[extra_info.CREATABLE] = str(count)
    else:
        extra.pop(extra_info.CREATABLE, None)
    return extra
