"""Choose the host NUMA cells of an instance so that its PCI requests fit.

Only PCI is considered (CPU and memory fitting is Nova's business). The
choice is deterministic: host cells are ordered by how many free devices
matching the requests they have (most first, then by id; for an instance
without PCI requests fewest first, keeping PCI cells for PCI instances, as
Nova does), and combinations of ``hw:numa_nodes`` cells are tried in that
order. A first pass asks for full NUMA affinity (every request treated as
``required``), so a ``preferred``/``legacy``/``socket`` request gets affine
devices whenever some combination offers them; a second pass applies the
requests' own policies. Nothing is consumed: the caller claims afterwards.
"""

import itertools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields

#: How many failed combinations :func:`fit_instance` explains at most.
MAX_EXPLAINED = 4


def _strict(requests):
    strict = []
    for request in requests:
        clone = request.obj_clone()
        clone.numa_policy = fields.PCINUMAAffinityPolicy.REQUIRED
        strict.append(clone)
    return strict


def _ids(cells):
    return ', '.join(str(c.id) for c in cells)


def fit_instance(topology, numa_nodes, requests, stats):
    """Host cells for an instance with ``hw:numa_nodes=numa_nodes``.

    Returns the chosen ``HostCell``s sorted by id, or None when
    ``numa_nodes`` is None (the instance has no NUMA topology; the requests
    must still fit without NUMA constraint). Raises
    ``exception.RequestNotSatisfiable`` with :meth:`PciDeviceStats.explain`
    lines when nothing fits, ``exception.InvalidValue`` for a bad
    ``numa_nodes``.
    """
    requests = list(requests or ())
    if numa_nodes is None:
        if requests and not stats.support_requests(requests, None):
            raise exception.RequestNotSatisfiable(
                reason='; '.join(stats.explain(requests, None)))
        return None
    if (isinstance(numa_nodes, bool) or not isinstance(numa_nodes, int)
            or numa_nodes < 1):
        raise exception.InvalidValue(
            field='hw:numa_nodes', value=numa_nodes,
            rule='must be a positive integer')
    cells = tuple(topology.cells) if topology is not None else ()
    if numa_nodes > len(cells):
        raise exception.RequestNotSatisfiable(
            reason='hw:numa_nodes=%d needs %d host NUMA cells, the host has '
                   '%d (%s)' % (numa_nodes, numa_nodes, len(cells),
                                _ids(cells) or 'none'))
    free = stats.free_by_numa_node(requests) if requests else (
        stats.free_by_numa_node())
    sign = -1 if requests else 1
    order = sorted(cells, key=lambda c: (sign * free.get(c.id, 0), c.id))
    combos = list(itertools.combinations(order, numa_nodes))
    if requests:
        for wanted in (_strict(requests), requests):
            for combo in combos:
                if stats.support_requests(wanted, combo):
                    return sorted(combo, key=lambda c: c.id)
    else:
        return sorted(combos[0], key=lambda c: c.id)
    lines = []
    for combo in combos[:MAX_EXPLAINED]:
        lines.extend('NUMA cells %s: %s' % (_ids(sorted(combo,
                                                        key=lambda c: c.id)),
                                            line)
                     for line in stats.explain(requests, combo))
    if len(combos) > MAX_EXPLAINED:
        lines.append('%d more combinations of %d NUMA cells do not fit '
                     'either' % (len(combos) - MAX_EXPLAINED, numa_nodes))
    raise exception.RequestNotSatisfiable(reason='; '.join(lines))
