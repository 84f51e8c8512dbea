"""The ``nvidia/`` sysfs directory of NVIDIA vGPU VFs: reads and writes.

Layout used (NVIDIA's vendor-specific VFIO framework, relative to a
configurable ``root``; ``/`` on a real host)::

    <root>/sys/bus/pci/devices/<VF>/nvidia/
        current_vgpu_type       "0", or the id of the vGPU type the VF holds
        creatable_vgpu_types    "ID : vGPU Name" header, "<id> : <name>" lines

A type is chosen by writing its id to ``current_vgpu_type`` and dropped by
writing ``0`` (NVIDIA documents that the VF's VFIO device must be closed,
i.e. the guest gone, before it can be dropped). Nothing else in the
directory (``gpu_instance_id``, ``placement_id``, ``vgpu_params``...) is
read or written.

Invariants: an address is a canonical PCI address and a type id comes
from :func:`.nvidia.vf.type_id_of` before any path is built from them (bad
ones raise ``Invalid`` and touch nothing); a path resolving outside
``<root>/sys`` is refused; attribute files are written without
``O_CREAT`` and without following a symlink in the last component; every
``OSError`` of a write becomes a
:class:`~nova_pci_mdev.exception.VgpuVfError` naming the VF, the value and
the errno (``kwargs['errno']`` holds its symbolic name). Every write is
followed by reading ``current_vgpu_type`` back.

The write goes through ``writer(path, data)`` (default: ``open(2)`` +
``write(2)``) so that an emulated driver can play the kernel on a tree
(:class:`~.emulated.nvidia.EmulatedDriver`).
"""

import os

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf


#: The most read of an attribute file (sysfs gives at most a page; NVIDIA's
#: creatable list of a large GPU stays far below).
ATTRIBUTE_BYTES = 65536


def vf_address(value):
    """A canonical PCI address of a VF, or InvalidValue."""
    try:
        address = names.normalize_address(value)
    except exception.Invalid:
        address = None
    if address is None or not names.is_pci_address(address):
        raise exception.InvalidValue(
            field='vGPU VF address', value=value,
            rule='expected a PCI address dddd:bb:ss.f (hex)')
    return address


class NvidiaVfSysfs(object):
    """The ``nvidia/`` directories of the VFs under ``root``."""

    def __init__(self, root='/', writer=None):
        self.root = os.path.abspath(root)
        self.sys = os.path.join(self.root, 'sys')
        self._write = writer or mdev_sysfs.write_attribute

    def _dir(self, address):
        return os.path.join(self.sys, 'bus', 'pci', 'devices', address,
                            nvidia_vf.SYSFS_DIR)

    def _inside(self, path):
        top = os.path.realpath(self.sys)
        return os.path.realpath(path).startswith(top + os.sep)

    def _guarded(self, address, name):
        path = os.path.join(self._dir(address), name)
        if not self._inside(path):
            raise exception.VgpuVfError(
                address=address, errno='EACCES',
                reason='%s resolves outside %s' % (path, self.sys))
        return path

    def _read(self, address, name):
        path = self._guarded(address, name)
        try:
            return input_files.read_text(
                path, encoding='ascii', errors='replace',
                max_bytes=ATTRIBUTE_BYTES, follow=False), path
        except input_files.NotAnInputFile as exc:
            raise exception.VgpuVfError(
                address=address, errno='EINVAL',
                reason='cannot read %s: it %s (a sysfs attribute of at most '
                       '%d bytes)' % (path, exc, ATTRIBUTE_BYTES)) from None
        except OSError as exc:
            raise exception.VgpuVfError(
                address=address, errno=mdev.errno_name(exc.errno),
                reason='cannot read %s: %s' % (path, os.strerror(exc.errno)
                                               if exc.errno else exc))

    def state(self, address):
        """The :class:`~.nvidia.vf.VfState` of a VF, or None when it has no
        ``nvidia/`` directory (not a VF of the vendor framework)."""
        address = vf_address(address)
        if not os.path.isdir(self._dir(address)):
            return None
        text, path = self._read(address, nvidia_vf.CURRENT_FILE)
        current = nvidia_vf.parse_current(text, path)
        text, path = self._read(address, nvidia_vf.CREATABLE_FILE)
        return nvidia_vf.VfState(address, current,
                                 nvidia_vf.parse_creatable(text, path))

    def states(self, addresses):
        """``{address: VfState}`` of those of ``addresses`` that have an
        ``nvidia/`` directory (one directory check per address)."""
        found = {}
        for address in addresses:
            state = self.state(address)
            if state is not None:
                found[state.address] = state
        return found

    def write_type(self, address, type_id):
        """Write ``type_id`` (0 drops the type) to ``current_vgpu_type``
        and return the id read back. No policy: see
        :class:`~.nvidia.vgpu_vfs.VgpuVfManager`."""
        address = vf_address(address)
        if type_id != 0:
            nvidia_vf.type_name(type_id)      # validates the id
        path = self._guarded(address, nvidia_vf.CURRENT_FILE)
        try:
            self._write(path, str(type_id))
        except OSError as exc:
            name = mdev.errno_name(exc.errno) if exc.errno else None
            raise exception.VgpuVfError(
                address=address, errno=name,
                reason='writing %d to %s failed: %s (%s)' % (
                    type_id, path, os.strerror(exc.errno) if exc.errno
                    else exc, name))
        text, path = self._read(address, nvidia_vf.CURRENT_FILE)
        return nvidia_vf.parse_current(text, path)
