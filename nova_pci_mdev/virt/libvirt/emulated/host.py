"""A libvirt ``test://`` host with emulated mdevs and a sidecar.

libvirt's test driver reads a host file faithfully but cannot create mdevs,
gives a custom host no NUMA cells, reports the real machine's hostname and
(up to libvirt 9) refuses virtual mdev parents such as ``mtty``. For such a
host this module adds what the driver cannot give:

* a **sidecar** ``<host file stem>_topology.json`` beside the host file
  (optional): ``hostname``, NUMA ``cells``, ``extra_node_devices``
  (node-device XML documents listed as if libvirt had them) and
  ``hypervisor`` (``{"type": "QEMU", "version": "8.2.2"}``: the hypervisor
  the host stands for, instead of the test driver's ``TEST`` 0.0.2; only
  live moves read it);
  ``nvidia_sysfs`` (a directory, relative to the sidecar, holding the
  ``nvidia/`` sysfs directories of NVIDIA vGPU VFs and the catalogue of
  their emulated driver, see :mod:`.emulated.nvidia`);
* an :class:`~.emulated.mdevs.EmulatedBackend` in the state directory that
  holds the host's mdevs. It is seeded once with the mdevs of the host
  file; afterwards it is the truth: :meth:`EmulatedHost.devices` lists its
  mdevs instead of the file's, and each parent type's
  ``availableInstances`` is the file's capacity minus the mdevs the backend
  holds, exactly as a kernel would report after creating them.

Invariant: for every (parent, type) the host file offers, existing mdevs
plus ``availableInstances`` stay equal to the file's capacity, so slots
(and their UUIDs) are the same whatever was created.
"""

import dataclasses
import hashlib
import os
import re

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import listing as listing_mod
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt.emulated import host_facts
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated

SIDECAR_SUFFIX = '_topology.json'
#: A hypervisor version: ASCII digits only (``str.isdigit`` also takes
#: ``²``, which ``int`` refuses).
_VERSION_RE = re.compile(r'([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})')


@dataclasses.dataclass(frozen=True)
class Sidecar:
    path: str | None = None
    hostname: str | None = None
    topology: object = None            # numa.HostTopology or None
    extra_node_devices: tuple = ()     # XML strings
    hypervisor: tuple | None = None    # (type, version as libvirt encodes)
    nvidia_sysfs: str | None = None    # absolute path of a sysfs tree


def sidecar_path(host_file):
    """``/a/host.xml`` -> ``/a/host_topology.json``."""
    stem, _ = os.path.splitext(host_file)
    return stem + SIDECAR_SUFFIX


def load_sidecar(path):
    """Read a sidecar file; a missing file is an empty sidecar."""
    if path is None or not os.path.exists(path):
        return Sidecar()
    try:
        data = input_files.load_json(path)
    except (OSError, ValueError) as exc:
        raise exception.TopologySidecarInvalid(path=path, reason=str(exc))
    if not isinstance(data, dict):
        raise exception.TopologySidecarInvalid(
            path=path, reason='expected a JSON object')
    extra = data.get('extra_node_devices', [])
    if not isinstance(extra, list) or not all(
            isinstance(x, str) for x in extra):
        raise exception.TopologySidecarInvalid(
            path=path, reason='extra_node_devices must be a list of XML '
                              'strings')
    hostname = data.get('hostname')
    if hostname is not None and not isinstance(hostname, str):
        raise exception.TopologySidecarInvalid(
            path=path, reason='hostname must be a string')
    unknown = set(data) - {'_comment', 'hostname', 'cells',
                           'extra_node_devices', 'hypervisor',
                           'nvidia_sysfs'}
    if unknown:
        raise exception.TopologySidecarInvalid(
            path=path,
            reason='unknown key(s) %s (allowed: hostname, cells, '
                   'extra_node_devices, hypervisor, nvidia_sysfs)'
                   % ', '.join(sorted(unknown)))
    topology = (capabilities.topology_from_dict({'cells': data['cells']},
                                                source=path)
                if 'cells' in data else None)
    return Sidecar(path=path, hostname=hostname, topology=topology,
                   extra_node_devices=tuple(extra),
                   hypervisor=_hypervisor(path, data.get('hypervisor')),
                   nvidia_sysfs=_nvidia_sysfs(path, data.get('nvidia_sysfs')))


def _nvidia_sysfs(path, value):
    """The absolute directory a sidecar's ``nvidia_sysfs`` (relative to
    the sidecar) names, or None when absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or '\0' in value:
        raise exception.TopologySidecarInvalid(
            path=path, reason='nvidia_sysfs must be a directory path')
    tree = os.path.join(os.path.dirname(os.path.abspath(path)), value)
    if not os.path.isdir(tree):
        raise exception.TopologySidecarInvalid(
            path=path, reason='nvidia_sysfs %s is not a directory' % tree)
    return tree


def _hypervisor(path, value):
    """``{"type": T, "version": "X.Y.Z"}`` -> ``(T, X * 10**6 + Y * 1000 +
    Z)``, or None when absent."""
    if value is None:
        return None
    version = value.get('version') if isinstance(value, dict) else None
    match = (_VERSION_RE.fullmatch(version) if isinstance(version, str)
             else None)
    if (match is None or set(value) != {'type', 'version'} or
            not isinstance(value['type'], str) or not value['type']):
        raise exception.TopologySidecarInvalid(
            path=path, reason='hypervisor must be {"type": NAME, "version": '
                              '"X.Y.Z"} (X, Y, Z of 1 to 3 ASCII digits '
                              '0-9), got %.200r' % (value,))
    major, minor, micro = (int(p) for p in match.groups())
    return value['type'], major * 1000000 + minor * 1000 + micro


class EmulatedHost(host_mod.Host):
    """A test-driver host whose mdevs live in ``<state_dir>/mdevs.json``.

    The host file's listing is read once per instance (the test driver
    holds the file as it was at open), and parsed only when a discovery
    needs records; what the backend and the topology need of it comes from
    :mod:`.emulated.host_facts`, parsed again only when the listing changes.
    """

    def __init__(self, conn, state_dir, sidecar=Sidecar(), nodename=None,
                 libvirt=None):
        super().__init__(conn, nodename or sidecar.hostname,
                         libvirt=libvirt)
        self.sidecar = sidecar
        self.state_dir = state_dir
        self._file = None           # listing of the file + sidecar extras
        self._file_digest = None
        self._parsed = None
        self._file_left_out = []
        self._facts = None
        self.backend = mdev_emulated.EmulatedBackend(
            state_dir, lambda: self.facts().capacity,
            initial=lambda: self.facts().initial)

    @property
    def hypervisor_type(self):
        if self.sidecar.hypervisor is not None:
            return self.sidecar.hypervisor[0]
        return super().hypervisor_type

    @property
    def hypervisor_version(self):
        if self.sidecar.hypervisor is not None:
            return self.sidecar.hypervisor[1]
        return super().hypervisor_version

    def _file_listing(self):
        if self._file is None:
            extra = tuple(listing_mod.Entry(None, xml, None)
                          for xml in self.sidecar.extra_node_devices)
            self._file = super().listing() + extra
            self._file_digest = listing_mod.digest(
                self._file, hashlib.sha256()).hexdigest()
        return self._file

    def _file_devices(self):
        """The parsed file (and sidecar) devices; what could not be read
        is kept in ``_file_left_out`` for every discovery to report."""
        if self._parsed is None:
            self._parsed = self.parse(self._file_listing())
            self._file_left_out = list(self.left_out)
        return self._parsed

    def facts(self):
        """:class:`.emulated.host_facts.HostFacts` of the host file."""
        if self._facts is None:
            self._file_listing()
            self._facts = host_facts.load(self.state_dir, self._file_digest)
            if self._facts is None:
                self._facts = host_facts.from_devices(self._file_devices())
                host_facts.save(self.state_dir, self._file_digest,
                                self._facts)
        return self._facts

    def discovery_input(self):
        """The file's listing and the backend's mdevs, unparsed."""
        return (self._file_listing(), self.backend.list())

    def digest_input(self, source, hasher):
        self._file_listing()
        hasher.update(self._file_digest.encode('ascii'))
        for uuid, info in sorted(source[1].items()):
            hasher.update(('%s\0%s\0%s\0' % (
                uuid, info.parent, info.mdev_type)).encode())
        return hasher

    @staticmethod
    def listed_mdevs(source):
        return set(source[1])

    def _devices_of(self, source):
        return self._devices_with(source[1])

    def devices(self, flags=None):
        """The host file's devices with the backend's mdevs (see module)."""
        return self._devices_with(self.backend.list())

    def _devices_with(self, made):
        facts = self.facts()
        capacity = facts.capacity
        self._file_devices()
        self.left_out = list(self._file_left_out) + [
            exception.NodeDeviceLeftOut(device=device, reason=reason)
            for device, reason in facts.left_out]
        used = {}
        for info in made.values():
            key = (info.parent, info.mdev_type)
            used[key] = used.get(key, 0) + 1
        result = []
        name_of = {}
        # The file's mdevs that no parent of the file hosts were never
        # seeded into the backend: they pass as the file has them, for
        # discovery to name (those two parents claim are named already).
        seeded = {uuid for uuid, _parent, _type in facts.initial}
        named = {device for device, _reason in facts.left_out}
        orphans = set()
        for dev in self._file_devices():
            if isinstance(dev, nodedev.Mdev):
                if dev.uuid not in seeded and dev.name not in named:
                    result.append(dev)
                    orphans.add(dev.uuid)
                continue
            if isinstance(dev, nodedev.OtherMdevParent):
                result.append(dev)
                continue
            if getattr(dev, 'mdev_types', ()):
                kinds = tuple(dataclasses.replace(
                    k, available_instances=max(0, capacity.get(
                        (dev.address, k.id), 0) - used.get(
                        (dev.address, k.id), 0)))
                    for k in dev.mdev_types)
                dev = dataclasses.replace(dev, mdev_types=kinds)
            name_of[dev.address] = dev.name
            result.append(dev)
        for info in made.values():
            if info.uuid in orphans:
                continue        # seeded by an older version
            parent_name = name_of.get(info.parent)
            result.append(nodedev.Mdev(
                name=nodenames.mdev_node_name(info.uuid, parent_name),
                uuid=info.uuid, mdev_type=info.mdev_type,
                parent=parent_name, parent_addr=info.parent))
        return result

    def numa_topology(self, sidecar=None):
        topology = super().numa_topology()
        if topology.cells:
            return topology
        if self.sidecar.topology is not None:
            return self.sidecar.topology
        return capabilities.topology_from_numa_nodes(self.facts().numa_nodes)
