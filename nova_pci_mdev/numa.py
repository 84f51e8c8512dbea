"""Host NUMA topology as the PCI framework sees it.

Pure data: the libvirt adapter builds a :class:`HostTopology` from the
capabilities XML (or a sidecar file); the pools and the fitter only read
it. Invariant: cell ids are unique; ``socket`` is None when unknown.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class HostCell:
    id: int
    socket: int | None = None
    cpus: frozenset = frozenset()
    memory_kb: int = 0


@dataclasses.dataclass(frozen=True)
class HostTopology:
    cells: tuple = ()

    def __post_init__(self):
        ids = [c.id for c in self.cells]
        if len(ids) != len(set(ids)):
            raise ValueError('duplicate NUMA cell ids: %s' % ids)

    def cell(self, cell_id):
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        return None

    def socket_of(self, cell_id):
        cell = self.cell(cell_id)
        return None if cell is None else cell.socket

    @property
    def ids(self):
        return tuple(c.id for c in self.cells)
