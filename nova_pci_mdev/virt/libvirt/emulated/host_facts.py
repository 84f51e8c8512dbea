"""What an emulated host needs from its host file, kept beside its state.

:class:`~.emulated.EmulatedHost` needs three facts of the host file (and
the sidecar's extra node devices) before any discovery: the mdev capacity
of every (parent, type), the mdevs the file already has (to seed the
emulated backend once) and the devices' NUMA nodes (the topology of a host
without cells). Parsing 10,000 node devices for them costs more than
everything else a command does, and they change only when the file does;
so they are kept in ``<state_dir>/host-facts.json`` with the digest of the
listing they came from, and parsed again only when that digest changes.

The file is a cache, never state: a missing, unreadable, foreign or
malformed file (or another digest) means "parse again", and the rewrite
is atomic (temporary file, rename). Values read back are checked again by
their users (the backend validates capacity keys and mdev names).
"""

import contextlib
import dataclasses
import json
import os
import tempfile

from nova_pci_mdev import input_files
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import records

FILE = 'host-facts.json'
VERSION = 3


@dataclasses.dataclass(frozen=True)
class HostFacts:
    capacity: dict          # (parent address, mdev type) -> total
    #: (uuid, parent address, mdev type) of the file's mdevs whose parent
    #: is an mdev parent of the file (the others are discovery's to name)
    initial: tuple
    numa_nodes: tuple       # distinct NUMA nodes of the devices (no None)
    #: (device, reason) of the file's mdevs left out: a UUID under two
    #: parents is believed under neither.
    left_out: tuple = ()


def from_devices(devices):
    """The facts of parsed node devices (:mod:`.nodedev` objects)."""
    parents = {}
    mdevs = []
    for dev in devices:
        if isinstance(dev, nodedev.Mdev):
            mdevs.append(dev)
        elif isinstance(dev, (nodedev.PciFunction, nodedev.VirtualParent)
                        ) and dev.mdev_types:
            parents[dev.name] = dev
    # The same mdev UUID under two parents: neither is believed, so
    # neither parent is offered a slot the host does not have.
    duplicates = []
    mdevs = records.unique(mdevs, duplicates)
    address_of = {name: dev.address for name, dev in parents.items()}
    located = [(m, nodenames.parent_address(m, address_of)) for m in mdevs]
    used = {}
    for m, parent in located:
        key = (parent, m.mdev_type)
        used[key] = used.get(key, 0) + 1
    capacity = {}
    for dev in parents.values():
        for kind in dev.mdev_types:
            key = (dev.address, kind.id)
            capacity[key] = kind.available_instances + used.get(key, 0)
    nodes = {getattr(d, 'numa_node', None) for d in devices}
    nodes.discard(None)
    hosts = {dev.address for dev in parents.values()}
    return HostFacts(
        capacity=capacity,
        initial=tuple((m.uuid, parent, m.mdev_type)
                      for m, parent in located if parent in hosts),
        numa_nodes=tuple(sorted(nodes)),
        left_out=tuple((p.kwargs['device'], p.kwargs['reason'])
                       for p in duplicates))


def load(state_dir, digest):
    """The facts recorded for ``digest``, or None."""
    try:
        doc = input_files.load_json(os.path.join(state_dir, FILE),
                                    follow=False)
        if doc['version'] != VERSION or doc['digest'] != digest:
            return None
        facts = HostFacts(
            capacity={(p, t): n for p, t, n in doc['capacity']},
            initial=tuple((u, p, t) for u, p, t in doc['initial']),
            numa_nodes=tuple(doc['numa_nodes']),
            left_out=tuple((d, r) for d, r in doc['left_out']))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return facts if _well_formed(facts) else None


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and (
        value >= 0)


def _well_formed(facts):
    return (all(isinstance(p, str) and isinstance(t, str) and _count(n)
                for (p, t), n in facts.capacity.items())
            and all(isinstance(x, str) for i in facts.initial for x in i)
            and all(_count(n) for n in facts.numa_nodes)
            and all(isinstance(x, str) for i in facts.left_out for x in i))


def save(state_dir, digest, facts):
    """Record ``facts`` for ``digest`` (best effort: it is a cache)."""
    doc = {'version': VERSION, 'digest': digest,
           'capacity': sorted([p, t, n]
                              for (p, t), n in facts.capacity.items()),
           'initial': [list(i) for i in facts.initial],
           'numa_nodes': list(facts.numa_nodes),
           'left_out': [list(i) for i in facts.left_out]}
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(dir=state_dir, prefix='.host-facts.',
                                   suffix='.tmp')
        try:
            with os.fdopen(fd, 'w', encoding='utf-8') as f:
                json.dump(doc, f)
            os.replace(tmp, os.path.join(state_dir, FILE))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
