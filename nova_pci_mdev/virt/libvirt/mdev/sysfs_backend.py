"""mdev lifecycle through the kernel's sysfs.

Layout used (the kernel's, relative to a configurable ``root``)::

    <root>/sys/class/mdev_bus/<parent>            -> ../../devices/.../<parent>
        mdev_supported_types/<type>/
            available_instances  name  device_api  create  devices/
    <root>/sys/bus/mdev/devices/<uuid>            -> .../<parent>/<uuid>
        mdev_type -> ../mdev_supported_types/<type>
        remove

Creating writes the UUID to ``<type>/create``; removing writes ``1`` to the
mdev's ``remove``, unless a process holds the mdev's VFIO group
(``/dev/vfio/<iommu_group>``, found in ``<root>/proc/*/fd``) open: the
kernel (6.1, mtty) does not refuse such a removal, it blocks the writer
until the holder (QEMU) lets go and then removes the mdev under it, so
the backend refuses with ``EBUSY`` instead, naming the holders.

Invariants: the UUID, parent and type are validated before a path is built
from them; a path that resolves outside ``<root>/sys`` is
refused; attribute files are opened without ``O_CREAT`` (a missing parent or
type is ``ENOENT``, never a stray plain file); every ``OSError`` becomes an
``MdevError`` naming the UUID, the parent and the errno text.

The write itself goes through ``writer(path, data)`` (default: ``open(2)``
+ ``write(2)``), so that tests can play the kernel on a temporary tree
(:class:`nova_pci_mdev.tests.fixtures.sysfs.SysfsTree`).
"""

import os
import re

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev


#: The most read of an attribute file (sysfs gives at most a page).
ATTRIBUTE_BYTES = 4096
#: A count or a PID as the kernel writes it: ASCII digits (``str.isdigit``
#: and ``int`` also take other scripts' digits).
_DECIMAL_RE = re.compile(r'[0-9]{1,19}')


def write_attribute(path, data):
    """Write ``data`` to an existing sysfs attribute, as the kernel wants.

    No ``O_CREAT``, no following a symlink in the last component; the
    kernel reports refusals as the ``OSError`` of ``write(2)``.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, data.encode('ascii'))
    finally:
        os.close(fd)


class SysfsBackend(mdev.MdevBackend):
    """mdevs of the kernel under ``root`` (``/`` on a real host)."""

    def __init__(self, root='/', writer=None):
        self.root = os.path.abspath(root)
        self.sys = os.path.join(self.root, 'sys')
        self._write = writer or write_attribute

    # -- paths -------------------------------------------------------------

    def _type_dir(self, parent, mdev_type):
        return os.path.join(self.sys, 'class', 'mdev_bus', parent,
                            'mdev_supported_types', mdev_type)

    def _bus_dir(self):
        return os.path.join(self.sys, 'bus', 'mdev', 'devices')

    def _inside(self, path):
        """True when ``path`` resolves inside ``<root>/sys``."""
        top = os.path.realpath(self.sys)
        real = os.path.realpath(path)
        return real == top or real.startswith(top + os.sep)

    def _guard(self, path, uuid, parent):
        if not self._inside(path):
            raise exception.MdevError(
                uuid=uuid, parent=parent, errno='EACCES',
                reason='%s resolves outside %s' % (path, self.sys))

    # -- interface ---------------------------------------------------------

    def list(self):
        """``{uuid: MdevInfo}`` from ``<root>/sys/bus/mdev/devices``.

        Entries that are not UUIDs, that vanish while being read, that
        resolve outside sysfs or whose parent or type name is not a safe
        name are skipped: they cannot be ours.
        """
        result = {}
        try:
            entries = list(os.scandir(self._bus_dir()))
        except FileNotFoundError:
            return result       # mdev core not loaded: no mdevs
        except OSError as exc:
            raise exception.HypervisorError(
                device=self._bus_dir(), reason='cannot list mdevs: %s' % exc)
        for entry in entries:
            if not names.is_uuid(entry.name):
                continue
            device = os.path.realpath(entry.path)
            type_link = os.path.join(device, 'mdev_type')
            if not os.path.isdir(type_link) or not self._inside(type_link):
                continue
            parent = os.path.basename(os.path.dirname(device))
            mdev_type = os.path.basename(os.path.realpath(type_link))
            try:
                info = mdev.mdev_info(entry.name, parent, mdev_type)
            except exception.Invalid:
                continue
            result[info.uuid] = info
        return result

    def create(self, uuid, parent, mdev_type):
        info = mdev.mdev_info(uuid, parent, mdev_type)
        path = os.path.join(self._type_dir(info.parent, info.mdev_type),
                            'create')
        self._guard(path, info.uuid, info.parent)
        try:
            self._write(path, info.uuid)
        except OSError as exc:
            raise mdev.os_error(exc, info.uuid, info.parent,
                                'create of type %s' % info.mdev_type)

    def holders(self, uuid):
        """PIDs (sorted) that hold mdev ``uuid``'s VFIO group or device
        open, read from ``<root>/proc/<pid>/fd``; [] without a group."""
        link = os.path.join(self._bus_dir(), names.normalize_uuid(uuid))
        targets = set()
        for attr, dev in (('iommu_group', '/dev/vfio/%s'),
                          ('vfio-dev', '/dev/vfio/devices/%s')):
            path = os.path.join(link, attr)
            try:
                entries = ([os.path.basename(os.readlink(path))]
                           if attr == 'iommu_group' else os.listdir(path))
            except OSError:
                continue
            targets.update(dev % name for name in entries)
        return _pids_holding(os.path.join(self.root, 'proc'), targets)

    def remove(self, uuid):
        uuid = names.normalize_uuid(uuid)
        link = os.path.join(self._bus_dir(), uuid)
        parent = 'unknown'
        if os.path.lexists(link):
            parent = os.path.basename(os.path.dirname(os.path.realpath(link)))
        path = os.path.join(link, 'remove')
        if not os.path.exists(path):
            raise exception.MdevNotFound(
                uuid=uuid, parent=parent, errno='ENOENT',
                reason='remove failed: no such mdev under %s'
                       % self._bus_dir())
        self._guard(path, uuid, parent)
        held = self.holders(uuid)
        if held:
            raise exception.MdevError(
                uuid=uuid, parent=parent, errno='EBUSY',
                reason='remove refused: in use by process(es) %s holding '
                       'its VFIO group (the kernel would block the removal '
                       'until they let go)' % ', '.join(map(str, held)))
        try:
            self._write(path, '1')
        except OSError as exc:
            raise mdev.os_error(exc, uuid, parent, 'remove',
                                enoent=exception.MdevNotFound)

    def available(self, parent, mdev_type):
        parent = names.normalize_address(parent)
        mdev_type = names.validate_mdev_type(mdev_type)
        path = os.path.join(self._type_dir(parent, mdev_type),
                            'available_instances')
        if not self._inside(path):
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent, errno='EACCES',
                reason='%s resolves outside %s' % (path, self.sys))
        try:
            text = input_files.read_text(
                path, encoding='ascii', errors='replace',
                max_bytes=ATTRIBUTE_BYTES, follow=False).strip()
        except OSError as exc:
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent,
                errno=mdev.errno_name(exc.errno) if exc.errno else 'EINVAL',
                reason='cannot read %s: %s' % (
                    path, os.strerror(exc.errno) if exc.errno else exc))
        value = int(text) if _DECIMAL_RE.fullmatch(text) else -1
        if value < 0:
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent, errno=None,
                reason='%s holds %r, expected a non-negative integer'
                       % (path, text))
        return value


def _pids_holding(proc, targets):
    """PIDs under ``proc`` with a descriptor whose link is in ``targets``.

    Linear in the number of open descriptors; processes that end or deny
    access while being read are skipped.
    """
    if not targets:
        return []
    try:
        pids = [e.name for e in os.scandir(proc)
                if _DECIMAL_RE.fullmatch(e.name)]
    except OSError:
        return []
    found = []
    for pid in pids:
        fd_dir = os.path.join(proc, pid, 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in targets:
                    found.append(int(pid))
                    break
            except OSError:
                continue
    return sorted(found)
