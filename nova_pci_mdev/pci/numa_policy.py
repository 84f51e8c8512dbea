"""NUMA affinity policies: may a device on a NUMA node serve an instance?

NUMA policies (``hw:pci_numa_affinity_policy``, as Nova documents them;
``numa_cells`` None or empty means the instance has no NUMA topology and
nothing is filtered):

* ``required``: the device's node is one of the instance's cells;
* ``legacy`` (also when the request has no policy): as ``required``, but a
  device that reports no NUMA node is acceptable too;
* ``preferred``: any device, affine ones first;
* ``socket``: the device's node is on the socket of one of the instance's
  cells (devices without a node never qualify). If a host cell has no socket
  id the policy degrades to ``required``, which is what Nova ends up doing.

:class:`InstanceCells` holds the instance's cells as the policies see them
and ranks a device's node: 0 affine, 1 acceptable, 2 last resort, None not
allowed; the pools take devices by rank, so affine ones always go first.
Pure, no I/O.
"""

from nova_pci_mdev.objects import fields

Policy = fields.PCINUMAAffinityPolicy


def _cell_id(cell):
    return getattr(cell, 'id', cell)


class InstanceCells(object):
    """The instance's cells as the policies see them."""

    def __init__(self, topology, numa_cells):
        # Plain loops: built for every plan (a claim, a query).
        self.cell_ids = self.sockets = self.socket_nodes = None
        if not numa_cells:
            return
        ids = set()
        for cell in numa_cells:
            ids.add(_cell_id(cell))
        self.cell_ids = frozenset(ids)
        cells = topology.cells if topology is not None else ()
        if not cells:
            return
        sockets = set()
        for cell in cells:
            if cell.socket is None:
                return              # no socket ids: no socket policy
            if cell.id in ids:
                sockets.add(cell.socket)
        nodes = set()
        for cell in cells:
            if cell.socket in sockets:
                nodes.add(cell.id)
        self.sockets = frozenset(sockets)
        self.socket_nodes = frozenset(nodes)

    def rank(self, numa_node, policy):
        """0 affine, 1 acceptable, 2 last resort, None not allowed."""
        if self.cell_ids is None or numa_node in self.cell_ids:
            return 0
        if policy == Policy.REQUIRED:
            return None
        if policy == Policy.SOCKET:
            ok = self.socket_nodes is not None and (
                numa_node in self.socket_nodes)
            return 1 if ok else None
        if numa_node is None:
            return 1
        return 2 if policy == Policy.PREFERRED else None
