"""Host NUMA topology from libvirt's capabilities XML or a sidecar file.

Pure except :func:`load_topology_sidecar`, which reads one file.
:func:`parse_topology` reads ``/capabilities/host/topology/cells/cell``:
the cell id, its memory (converted to KiB) and its CPUs with their
``socket_id``. A cell's ``socket`` is the one socket all its CPUs sit on;
it is None when the CPUs give no socket id or sit on several sockets
(ambiguous, so socket affinity cannot be promised). A host that reports no
cells (libvirt's test driver on a custom host file) yields an empty
:class:`~nova_pci_mdev.numa.HostTopology`; the caller may then load a
sidecar file::

    {"cells": [{"id": 0, "socket": 0, "cpus": [0, 1], "memory_kb": 4194304}]}

Invariant: every returned topology has unique cell ids, non-negative ids,
CPU ids, sockets and memory; bad input raises
:class:`~nova_pci_mdev.exception.CapabilitiesXMLInvalid` or
:class:`~nova_pci_mdev.exception.TopologySidecarInvalid` naming the value.
"""

import re

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev import numa
from nova_pci_mdev.virt.libvirt import xmlsafe

#: KiB per unit, for ``<memory unit=...>`` (libvirt's scaled integers).
_UNITS_KIB = {
    'b': 1 / 1024, 'bytes': 1 / 1024,
    'k': 1, 'kib': 1, 'kb': 1000 / 1024,
    'm': 1024, 'mib': 1024, 'mb': 1000 ** 2 / 1024,
    'g': 1024 ** 2, 'gib': 1024 ** 2, 'gb': 1000 ** 3 / 1024,
    't': 1024 ** 3, 'tib': 1024 ** 3, 'tb': 1000 ** 4 / 1024,
}
_SIDECAR_CELL_KEYS = ('id', 'socket', 'cpus', 'memory_kb')
_ASCII_DIGITS = re.compile(r'[0-9]+')


def _caps_error(reason):
    return exception.CapabilitiesXMLInvalid(reason=reason)


#: More digits than any cell id, CPU id or memory size can have (2**64).
_MAX_DIGITS = 20


def _non_negative(value, what, error):
    text = (value or '').strip()
    if not _ASCII_DIGITS.fullmatch(text) or len(text) > _MAX_DIGITS:
        raise error('%s %r is not an integer >= 0 (ASCII digits only, at '
                    'most %d)' % (what, value if len(str(value)) < 80 else
                                  str(value)[:60] + '...', _MAX_DIGITS))
    return int(text)


def _memory_kib(elem, cell_id):
    if elem is None:
        return 0
    unit = (elem.get('unit') or 'KiB').lower()
    if unit not in _UNITS_KIB:
        raise _caps_error('cell %d: memory unit %r is not one of %s' % (
            cell_id, elem.get('unit'), ', '.join(sorted(_UNITS_KIB))))
    amount = _non_negative(elem.text, 'cell %d memory' % cell_id,
                           _caps_error)
    return int(amount * _UNITS_KIB[unit])


def _cell_socket(sockets):
    return next(iter(sockets)) if len(sockets) == 1 else None


def parse_topology(capabilities_xml):
    """A :class:`numa.HostTopology` from ``virConnectGetCapabilities``."""
    root = xmlsafe.parse_xml(capabilities_xml, _caps_error)
    if root.tag != 'capabilities':
        raise _caps_error('root element is <%s>, expected <capabilities>'
                          % root.tag)
    cells = []
    seen = set()
    for elem in root.findall('./host/topology/cells/cell'):
        cell_id = _non_negative(elem.get('id'), 'cell id', _caps_error)
        if cell_id in seen:
            raise _caps_error('cell id %d appears twice' % cell_id)
        seen.add(cell_id)
        cpus = set()
        sockets = set()
        for cpu in elem.findall('./cpus/cpu'):
            cpus.add(_non_negative(cpu.get('id'),
                                   'cell %d cpu id' % cell_id, _caps_error))
            if cpu.get('socket_id') is not None:
                sockets.add(_non_negative(
                    cpu.get('socket_id'), 'cell %d cpu socket_id' % cell_id,
                    _caps_error))
        cells.append(numa.HostCell(
            id=cell_id, socket=_cell_socket(sockets), cpus=frozenset(cpus),
            memory_kb=_memory_kib(elem.find('memory'), cell_id)))
    return numa.HostTopology(cells=tuple(sorted(cells, key=lambda c: c.id)))


# -- sidecar ---------------------------------------------------------------

def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and (
        value >= 0)


def topology_from_dict(data, source='<dict>'):
    """Validate a sidecar document (already decoded JSON) into a topology.

    ``source`` names the document in errors (the file path).
    """
    def error(reason):
        return exception.TopologySidecarInvalid(path=source, reason=reason)

    if not isinstance(data, dict) or not isinstance(data.get('cells'), list):
        raise error('expected an object {"cells": [...]}')
    unknown_top = sorted(set(data) - {'cells'})
    if unknown_top:
        raise error('unknown key(s) %s at top level (allowed: cells)'
                    % ', '.join(unknown_top))
    seen = set()
    cells = [_sidecar_cell('cells[%d]' % pos, cell, seen, error)
             for pos, cell in enumerate(data['cells'])]
    claimed = {}
    for cell in cells:
        for cpu in cell.cpus:
            if cpu in claimed:
                raise error('cpu %d is in cells %d and %d'
                            % (cpu, claimed[cpu], cell.id))
            claimed[cpu] = cell.id
    return numa.HostTopology(cells=tuple(sorted(cells, key=lambda c: c.id)))


def _sidecar_cell(where, cell, seen, error):
    """One validated cell of a sidecar; ``seen`` collects the ids."""
    if not isinstance(cell, dict):
        raise error('%s: expected an object, got %r' % (where, cell))
    unknown = sorted(set(cell) - set(_SIDECAR_CELL_KEYS))
    if unknown:
        raise error('%s: unknown key(s) %s (allowed: %s)' % (
            where, ', '.join(unknown), ', '.join(_SIDECAR_CELL_KEYS)))
    if not _is_count(cell.get('id')):
        raise error('%s: id %r is not an integer >= 0'
                    % (where, cell.get('id')))
    if cell['id'] in seen:
        raise error('%s: id %d appears twice' % (where, cell['id']))
    seen.add(cell['id'])
    socket = cell.get('socket')
    if socket is not None and not _is_count(socket):
        raise error('%s: socket %r is not an integer >= 0 or null'
                    % (where, socket))
    cpus = cell.get('cpus', [])
    if not isinstance(cpus, list) or not all(_is_count(c) for c in cpus):
        raise error('%s: cpus %r is not a list of integers >= 0'
                    % (where, cpus))
    memory = cell.get('memory_kb', 0)
    if not _is_count(memory):
        raise error('%s: memory_kb %r is not an integer >= 0'
                    % (where, memory))
    return numa.HostCell(id=cell['id'], socket=socket,
                         cpus=frozenset(cpus), memory_kb=memory)


def load_topology_sidecar(path):
    """Read and validate a sidecar JSON file (see the module docstring)."""
    try:
        data = input_files.load_json(path)
    except OSError as exc:
        raise exception.TopologySidecarInvalid(
            path=path, reason='cannot read: %s' % exc)
    except ValueError as exc:
        raise exception.TopologySidecarInvalid(
            path=path, reason='not valid JSON: %s' % exc)
    return topology_from_dict(data, source=path)


def topology_from_numa_nodes(numa_nodes):
    """Cells without CPUs or memory for the given NUMA node ids.

    For hosts that report no cells and have no sidecar: the devices' NUMA
    nodes are the only topology known. ``None`` entries are ignored.
    """
    ids = set()
    for node in numa_nodes:
        if node is None:
            continue
        if not _is_count(node):
            raise exception.InvalidValue(field='numa_node', value=node,
                                         rule='expected an integer >= 0')
        ids.add(node)
    ids = sorted(ids)
    return numa.HostTopology(cells=tuple(numa.HostCell(id=n) for n in ids))
