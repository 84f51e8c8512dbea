"""A ComputeHost assembled from a libvirt URI, a state directory and the
settings: what :func:`nova_pci_mdev.open_compute_host` returns, to the CLI,
the tests and any script.

* ``test://...`` (the bundled sample host or a host XML file a user
  writes): an :class:`~.virt.libvirt.emulated.host.EmulatedHost` whose mdevs
  live in the state directory, its sidecar beside the host file, and an
  emulated NVIDIA vGPU VF sysfs tree when the sidecar brings one;
* any other URI (``qemu:///system``): the libvirt node-device mdev backend
  on libvirt >= 7.3, else sysfs under ``/``, and ``/`` for NVIDIA VFs;
* a :class:`Hypervisor` handed in (the tests' fake libvirt and sysfs
  trees): used as it is; the URI then only names the store's owner.

Order: the connection URI, the state directory's path and the host (a
test host's file and sidecar, the libvirt connection) are checked before
anything is written, so that a command that cannot reach its host leaves
no state directory behind; then the state directory is created and the
store opened first in it: it refuses a state directory of another host,
or one whose store was lost, before anything else is written there; it is
closed again if anything after it fails. Errors name the connection as
``--connection`` and the directory as ``--state-dir``, the options that
give them on the command line.
"""

import os
import typing

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.compute import host as compute_mod
from nova_pci_mdev.store import sqlite as store_mod
from nova_pci_mdev.store import state_dir as state_dir_mod
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import uris
from nova_pci_mdev.virt.libvirt.emulated import host as emulated
from nova_pci_mdev.virt.libvirt.emulated import nvidia as nvidia_emulated
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import vgpu_vfs


class Hypervisor(typing.NamedTuple):
    """What a compute host runs on: ``host`` (a :class:`~.host.Host` or an
    :class:`~.emulated.host.EmulatedHost`), the mdev backend of its
    lifecycle (``mdevs``) and the ``nvidia/`` sysfs of its NVIDIA vGPU VFs
    (``vf_sysfs``, None when it has none)."""

    host: object
    mdevs: object
    vf_sysfs: object = None


def open_compute_host(connection, state_dir, settings, hypervisor=None):
    """The ComputeHost of ``connection`` (a libvirt URI) with its state in
    ``state_dir`` (see the module docstring); ``hypervisor``: a
    :class:`Hypervisor` to use instead of connecting."""
    state_dir = os.path.abspath(state_dir)
    if hypervisor is None:
        reason = uris.problem(connection)
        if reason:
            raise exception.InvalidValue(field='--connection',
                                         value=connection, rule=reason)
    state_dir_mod.check(state_dir)
    sidecar = None
    if hypervisor is None:
        _check_host_file(connection)
        # connect() gives a Host that reopens the connection if libvirtd
        # restarts.
        host = host_mod.connect(connection)
        if connection.startswith('test://'):
            path = uris.host_file(connection)
            sidecar = emulated.load_sidecar(
                emulated.sidecar_path(path) if path else None)
    else:
        host = hypervisor.host
    # Only now that the host could be read: a command that fails before
    # this point leaves no state directory behind.
    state_dir_mod.prepare(state_dir)
    store = _open_store(connection, state_dir, host, sidecar)
    try:
        if hypervisor is None:
            hypervisor = _hypervisor(state_dir, host, sidecar)
        return compute_mod.ComputeHost(
            hypervisor.host, settings, store,
            mdev.MdevManager(hypervisor.mdevs),
            hypervisor.host.numa_topology(),
            vgpus=vgpu_vfs.VgpuVfManager(hypervisor.vf_sysfs))
    except BaseException:
        store.close()
        raise


def _check_host_file(uri):
    """Refuse a ``test:///path`` whose host file or sidecar is not a
    regular file before libvirt's test driver or the sidecar reader opens
    it (a FIFO would block, a device be read without end); like every
    unusable host description, a host failure (exit 3)."""
    path = uris.host_file(uri)
    if path is None:
        return
    reason = input_files.problem(path)
    if reason:
        raise exception.HostDescriptionInvalid(
            reason='the host file %s of --connection %s %s'
            % (path, uri, reason))
    sidecar = emulated.sidecar_path(path)
    reason = input_files.problem(sidecar)
    if reason:
        raise exception.TopologySidecarInvalid(path=sidecar, reason=reason)


def _open_store(connection, state_dir, host, sidecar):
    return store_mod.SqliteStore(
        os.path.join(state_dir, state_dir_mod.STORE_FILE),
        busy_timeout=60,
        owner=state_dir_mod.owner(connection, (
            sidecar and sidecar.hostname) or host.hostname),
        beside=[os.path.join(state_dir, name)
                for name in state_dir_mod.EMULATED_FILES])


def _hypervisor(state_dir, host, sidecar):
    """The :class:`Hypervisor` of a connected ``host``."""
    conn = host.connection
    if sidecar is not None:
        host = emulated.EmulatedHost(conn, state_dir, sidecar,
                                     libvirt=host.libvirt)
        vf_sysfs = (nvidia_emulated.seeded_sysfs(sidecar.nvidia_sysfs,
                                                 state_dir)
                    if sidecar.nvidia_sysfs else None)
        return Hypervisor(host, host.backend, vf_sysfs)
    if host.has_min_version(7, 3):
        from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend
        backend = libvirt_backend.LibvirtNodeDeviceBackend(
            conn, libvirt=host.libvirt, current=host.live_connection)
    else:
        from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend
        backend = sysfs_backend.SysfsBackend('/')
    return Hypervisor(host, backend, nvidia_sysfs.NvidiaVfSysfs('/'))
