"""Operator text for requests the pools cannot meet.

:meth:`.stats.PciDeviceStats.explain` counts, per request it cannot meet,
what the pools hold (a :class:`Shortfall`); :func:`shortfall_line` turns
that into the one line an operator reads, e.g. ``alias vGPU: 0 free
nvidia-35 slots matching vendor_id=10de on NUMA node 1, policy required, 1
requested; 4 free on NUMA node 0; free per parent: 0000:84:00.0 on NUMA
node 0: 4``. Pure text: no pools, no I/O.
"""

import collections
import dataclasses

from nova_pci_mdev.objects import fields

DevType = fields.PciDeviceType
Policy = fields.PCINUMAAffinityPolicy


@dataclasses.dataclass
class Shortfall:
    """What the pools hold for one request that cannot be met.

    ``free``/``busy``: devices the request may use (free, or existing but
    in use); ``taken``: free ones earlier requests of the call took;
    ``elsewhere``: numa_node -> free devices the NUMA policy rules out;
    ``restricted``: ``(key, value)`` a request must name (``device_type``,
    or ``remote_managed``) -> free devices that match but serve only such
    requests.
    """

    free: int = 0
    busy: int = 0
    taken: int = 0
    elsewhere: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    restricted: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    #: (parent address, numa_node) -> free children the request could
    #: use but for its NUMA policy or count (VFs, slots, slots to create)
    by_parent: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    together: int = 0


def shortfall_line(request, index, specs, numa, policy, short):
    """The operator's line for ``request`` (number ``index`` of its call).

    ``specs``: the request's specs without the keys pools ignore; ``numa``
    has ``cell_ids`` (None without a NUMA topology), ``sockets``
    and ``socket_nodes``; ``short`` is a :class:`Shortfall`.
    """
    line = '%s: %d free %s' % (_who(request, index), short.free,
                               ' or '.join(_describe(s) for s in specs))
    if numa.cell_ids is not None:
        line += ' %s, policy %s' % (_where(numa, policy), policy)
    else:
        line += ' on any NUMA node (the instance has no NUMA topology)'
    if short.busy:
        line += ' (%d exist but are in use)' % short.busy
    line += ', %d requested' % request.count
    if short.free >= request.count:
        line += (' (only %d can be taken together: a parent taken whole '
                 'makes its children unusable, a child in use its parent)'
                 % short.together)
    notes = ['%d free %s' % (n, _node(node))
             for node, n in sorted(short.elsewhere.items(),
                                   key=lambda i: (i[0] is None, i[0]))
             if n]
    if short.taken:
        notes.append('%d taken by earlier requests of this call'
                     % short.taken)
    restricted = collections.Counter()
    for rule, n in short.restricted.items():
        restricted[_restriction(*rule)] += n
    notes.extend('%d free devices also match but serve only requests %s'
                 % (n, why) for why, n in sorted(restricted.items()) if n)
    parents = sorted(short.by_parent.items(), key=lambda i: (
        i[0][1] is None, i[0][1] or 0, i[0][0]))
    if parents:
        notes.append('free per parent: %s' % ', '.join(
            '%s %s: %d' % (parent, _node(node), n)
            for (parent, node), n in parents))
    return '; '.join([line] + notes)


def _who(request, index):
    if request.alias_name:
        return 'alias %s' % request.alias_name
    if request.requester_id:
        return 'requester %s' % request.requester_id
    if request.request_id:
        return 'request %s' % request.request_id
    return 'request #%d' % index


def _restriction(key, value):
    if key == 'device_type':
        return 'naming device_type %s' % value
    return 'asking for %s=%s' % (key, value)


def _describe(spec):
    spec = dict(spec)
    dev_type = spec.pop('dev_type', None)
    mdev_type = spec.get('mdev_type')
    if mdev_type and dev_type in (None, DevType.MDEV_VF):
        spec.pop('mdev_type')
        noun = '%s slots' % mdev_type
    else:
        noun = '%s devices' % dev_type if dev_type else 'devices'
    first = ('vendor_id', 'product_id', 'mdev_type')
    keys = [k for k in first if k in spec] + sorted(
        k for k in spec if k not in first)
    if keys:
        noun += ' matching ' + ', '.join('%s=%s' % (k, spec[k]) for k in keys)
    return noun


def _node(node):
    if node is None:
        return 'without NUMA affinity'
    return 'on NUMA node %s' % node


def _nodes(ids):
    ids = sorted(ids)
    return 'NUMA node%s %s' % ('' if len(ids) == 1 else 's',
                               ', '.join(str(i) for i in ids))


def _where(numa, policy):
    cells = 'on ' + _nodes(numa.cell_ids)
    if policy == Policy.LEGACY:
        return cells + ' or without NUMA affinity'
    if policy == Policy.PREFERRED:
        return 'on any NUMA node (preferring %s)' % _nodes(numa.cell_ids)
    if policy == Policy.SOCKET:
        if numa.socket_nodes is None:
            return cells + ' (host NUMA cells lack socket ids)'
        return 'on socket%s %s (%s)' % (
            '' if len(numa.sockets) == 1 else 's',
            ', '.join(str(s) for s in sorted(numa.sockets)),
            _nodes(numa.socket_nodes))
    return cells
