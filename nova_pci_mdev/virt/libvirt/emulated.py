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
  their emulated driver, see :mod:`.nvidia_emulated`);
* an :class:`~.mdev_emulated.EmulatedBackend` in the state directory that
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
import json
import os

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import mdev_emulated
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import records as records_mod

SIDECAR_SUFFIX = '_topology.json'


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
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError) as exc:
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
    parts = str(value.get('version', '')).split('.') if isinstance(
        value, dict) else ()
    if (not isinstance(value, dict) or set(value) != {'type', 'version'} or
            not isinstance(value['type'], str) or not value['type'] or
            len(parts) != 3 or not all(p.isdigit() and len(p) <= 3
                                       for p in parts)):
        raise exception.TopologySidecarInvalid(
            path=path, reason='hypervisor must be {"type": NAME, "version": '
                              '"X.Y.Z"} (at most 3 digits each), got %r'
                              % (value,))
    major, minor, micro = (int(p) for p in parts)
    return value['type'], major * 1000000 + minor * 1000 + micro


class EmulatedHost(host_mod.Host):
    """A test-driver host whose mdevs live in ``<state_dir>/mdevs.json``."""

    def __init__(self, conn, state_dir, sidecar=Sidecar(), nodename=None,
                 libvirt=None):
        super().__init__(conn, nodename or sidecar.hostname,
                         libvirt=libvirt)
        self.sidecar = sidecar
        self._own_left_out = []
        self._extra = []
        for xml in sidecar.extra_node_devices:
            try:
                dev = nodedev.parse_node_device(xml)
            except exception.NodeDeviceXMLInvalid as exc:
                self._own_left_out.append(host_mod.left_out(exc))
                continue
            if dev is not None:
                self._extra.append(dev)
        parents, file_mdevs = self._split(self._listed())
        # The same mdev UUID under two parents: neither is believed, so
        # neither parent is offered a slot the host does not have.
        file_mdevs = records_mod.unique(file_mdevs, self._own_left_out)
        address_of = {name: dev.address for name, dev in parents.items()}
        located = [(m, nodenames.parent_address(m, address_of))
                   for m in file_mdevs]
        used = {}
        for m, parent in located:
            key = (parent, m.mdev_type)
            used[key] = used.get(key, 0) + 1
        self._capacity = {}
        for dev in parents.values():
            for kind in dev.mdev_types:
                key = (dev.address, kind.id)
                self._capacity[key] = (kind.available_instances
                                       + used.get(key, 0))
        initial = [(m.uuid, parent, m.mdev_type) for m, parent in located
                   if parent is not None]
        self.backend = mdev_emulated.EmulatedBackend(
            state_dir, self._capacity, initial=initial)

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

    def _listed(self):
        """The host file's devices (Host.devices: unreadable ones left
        out) and the sidecar's; ``left_out`` reports both kinds."""
        listed = list(super().devices()) + self._extra
        self.left_out = self.left_out + list(
            getattr(self, '_own_left_out', ()))
        return listed

    @staticmethod
    def _split(devices):
        parents = {}
        mdevs = []
        for dev in devices:
            if isinstance(dev, nodedev.Mdev):
                mdevs.append(dev)
            elif getattr(dev, 'mdev_types', ()):
                parents[dev.name] = dev
        return parents, mdevs

    def devices(self, flags=None):
        """The host file's devices with the backend's mdevs (see module)."""
        made = self.backend.list()
        used = {}
        for info in made.values():
            key = (info.parent, info.mdev_type)
            used[key] = used.get(key, 0) + 1
        result = []
        name_of = {}
        for dev in self._listed():
            if isinstance(dev, nodedev.Mdev):
                continue
            if getattr(dev, 'mdev_types', ()):
                kinds = tuple(dataclasses.replace(
                    k, available_instances=max(0, self._capacity.get(
                        (dev.address, k.id), 0) - used.get(
                        (dev.address, k.id), 0)))
                    for k in dev.mdev_types)
                dev = dataclasses.replace(dev, mdev_types=kinds)
            name_of[dev.address] = dev.name
            result.append(dev)
        for info in made.values():
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
        return capabilities.topology_from_numa_nodes(
            getattr(d, 'numa_node', None) for d in self._listed())
