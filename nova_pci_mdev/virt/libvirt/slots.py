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
min(len(existing) + available, max_instances))``. Which caps apply to the
parents of one type (the device_spec key per parent, ``[mdev_<type>]
max_instances`` per host) is :func:`type_limits`'s answer.
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


def type_limits(parents, host_limit, per_host):
    """How many slots each parent exposing one type may still create.

    ``parents``: ``[(existing, available, own_limit)]`` in address order:
    the parent's slots of the type that exist (mdevs, or VFs holding it),
    the instances it can still create, and the ``max_instances`` of the
    ``[pci] device_spec`` entry covering it (None: none). ``host_limit``:
    ``[mdev_<type>] max_instances`` (None: none). ``per_host``: the
    configuration reads ``host_limit`` per host, Nova's meaning (it has a
    device_spec entry with ``max_instances`` for the type).

    Returns ``([creatable per parent], deprecated)``. Per host: each
    parent within its own limit, then at most ``host_limit`` slots of the
    type on the host, existing ones first (always counted, never dropped),
    the rest to the parents in order. Without ``per_host`` the deprecated
    per-parent reading of ``host_limit`` (nova-pci-mdev's before issue 27)
    is kept where the two readings differ, and ``deprecated`` is True.
    Linear in the number of parents.
    """
    own = [creatable_count(e, a, limit) for e, a, limit in parents]
    if host_limit is None:
        return own, False
    budget = max(0, host_limit - sum(e for e, _a, _l in parents))
    shared = []
    for count in own:
        take = min(count, budget)
        budget -= take
        shared.append(take)
    if per_host:
        return shared, False
    # Elementwise shared <= legacy, so equal sums mean equal lists.
    legacy = [creatable_count(
        e, a, host_limit if limit is None else min(limit, host_limit))
        for e, a, limit in parents]
    if sum(legacy) == sum(shared):
        return shared, False
    return legacy, True


def creatable_per_parent(parents, settings):
    """``[creatable]`` of ``parents``: ``[(record, options, existing,
    available)]`` of the parents exposing a type (``options``: its
    MdevTypeOptions), in address order. Those a device spec covers
    (``settings.parent_limits(record)``) share :func:`type_limits` per
    type; a parent none covers is never handed out and offers at most
    ``[mdev_<type>] max_instances``."""
    out = [0] * len(parents)
    by_type = {}
    for index, (record, options, existing, available) in enumerate(parents):
        covered, limit = settings.parent_limits(record)
        if covered:
            by_type.setdefault(options.mdev_type, []).append(
                (index, (existing, available, limit)))
        else:
            out[index] = creatable_count(existing, available,
                                         options.max_instances)
    for mdev_type, group in by_type.items():
        counts, _deprecated = type_limits(
            [counted for _i, counted in group],
            parents[group[0][0]][1].max_instances,
            settings.per_host(mdev_type))
        for (index, _c), count in zip(group, counts):
            out[index] = count
    return out
