"""mdev slots of one parent: which UUIDs the tracker may hand out.

Pure: no I/O. A slot is an mdev the parent hosts (``existing``) or can
still create (one per ``availableInstances``). The UUID of a slot that does
not exist yet comes from a fixed sequence::

    slot_uuid(nodename, parent_addr, mdev_type, 0), ... (index 1), ...

so it is the same after a restart, and the mdev later created for the slot
gets exactly that UUID.

Slots still to create are **counted, not listed** (:func:`creatable_count`,
issue 15): discovery reports the count with the parent, and the tracker
materialises a slot only when a claim takes it, with
:func:`new_slot_uuids`: the first UUIDs of the sequence that are not
taken. Cost is therefore independent of ``availableInstances`` (a parent
may report 2**31); a claim of ``k`` new slots walks at most ``k`` plus the
number of taken UUIDs.

Invariant (the reason for the design): creating the mdev of a creatable
slot (it becomes existing, ``availableInstances`` drops by one) leaves
the identities of the other creatable slots unchanged, so a sync after a
creation changes no identity. Proof sketch: creatable slots are the first
``k`` UUIDs of the sequence that are not existing; moving one of them to
the existing set lowers ``k`` by one and removes exactly that UUID from the
walk, so the remaining ``k - 1`` are the same UUIDs as before.
:func:`slots_for_parent` lists them all, for tools and tests that want
every identity (it is linear in the count; the product never calls it).

Cap: ``max_instances`` limits how many slots are *creatable*:
``creatable = min(available, max_instances - len(existing))`` (not below
0). Existing mdevs are always returned, even beyond the cap: they are real
devices that an instance may hold, and an operator lowering the cap must
not orphan them. So ``len(result) == max(len(existing),
min(len(existing) + available, max_instances))``.
"""

import hashlib
import uuid as uuid_lib

from nova_pci_mdev import exception
from nova_pci_mdev import names

#: Namespace of slot UUIDs; never change it (slot identities derive from it).
SLOT_NAMESPACE = uuid_lib.UUID('6f1c3a52-5d0e-4c1b-9a7e-0b8f2d4c6e10')
_NAMESPACE_BYTES = SLOT_NAMESPACE.bytes


def slot_uuid(nodename, parent_addr, mdev_type, index):
    """The UUID of creatable slot number ``index`` of a parent (uuid5).

    The parent address is normalised first, so ``0000:D8:00.0`` and
    ``0000:d8:00.0`` give the same UUID.
    """
    _check_nodename(nodename)
    _count(index, 'slot index')
    return _slot_uuid(nodename, names.normalize_address(parent_addr),
                      names.validate_mdev_type(mdev_type), index)


def _slot_uuid(nodename, parent_addr, mdev_type, index):
    """``str(uuid.uuid5(SLOT_NAMESPACE, key))`` without the UUID object
    (discovery computes one per creatable slot; the unit tests compare the
    two)."""
    key = '%s/%s/%s/%d' % (nodename, parent_addr, mdev_type, index)
    raw = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + key.encode('utf-8')).digest()[:16])
    raw[6] = (raw[6] & 0x0f) | 0x50       # version 5
    raw[8] = (raw[8] & 0x3f) | 0x80       # RFC 4122 variant
    text = raw.hex()
    return '%s-%s-%s-%s-%s' % (text[:8], text[8:12], text[12:16],
                               text[16:20], text[20:])


def _check_nodename(nodename):
    if not nodename or not isinstance(nodename, str):
        raise exception.InvalidValue(field='nodename', value=nodename,
                                     rule='expected a non-empty string')
    try:
        nodename.encode('utf-8')
    except UnicodeError:
        raise exception.InvalidValue(
            field='nodename', value=nodename,
            rule='must be encodable as UTF-8 (no lone surrogates)') from None


def _count(value, field, nullable=False):
    if value is None and nullable:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise exception.InvalidValue(
            field=field, value=value,
            rule='expected an integer >= 0' + (' or None' if nullable
                                               else ''))
    return value


def creatable_count(existing, available_instances, max_instances):
    """How many slots beyond the ``existing`` ones may be created."""
    available = _count(available_instances, 'availableInstances')
    cap = _count(max_instances, 'max_instances', nullable=True)
    if cap is None:
        return available
    return max(0, min(available, cap - existing))


def slots_for_parent(nodename, parent_addr, mdev_type, existing_uuids,
                     available_instances, max_instances=None):
    """Slot UUIDs of one parent for its one exposed type.

    ``existing_uuids``: UUIDs of the parent's mdevs of ``mdev_type`` (any
    order, duplicates ignored). Returns the existing UUIDs (sorted, lower
    case) followed by the creatable ones in sequence order. Linear in
    ``len(existing_uuids) + available_instances``.
    """
    _check_nodename(nodename)
    existing = sorted({names.normalize_uuid(u) for u in existing_uuids})
    wanted = creatable_count(len(existing), available_instances,
                             max_instances)
    return existing + new_slot_uuids(nodename, parent_addr, mdev_type,
                                     set(existing), wanted)


def new_slot_uuids(nodename, parent_addr, mdev_type, taken, count):
    """The first ``count`` UUIDs of the parent's sequence not in ``taken``
    (a set of lower-case UUIDs: the slots already tracked).

    Walks at most ``count + len(taken)`` indexes.
    """
    _check_nodename(nodename)
    _count(count, 'slot count')
    parent_addr = names.normalize_address(parent_addr)
    names.validate_mdev_type(mdev_type)
    found = []
    index = 0
    while len(found) < count:
        candidate = _slot_uuid(nodename, parent_addr, mdev_type, index)
        index += 1
        if candidate not in taken:
            found.append(candidate)
    return found
