"""Hypervisor versions, and the minimums a live migration of devices needs.

Pure: a :class:`HypervisorVersions` is read once from a libvirt connection
(``getLibVersion``, ``getType``, ``getVersion``) and compared here. The
minimums are Nova 34.0.0's (``nova/virt/libvirt/driver.py``):

======================================  =========  ======
what moves                              libvirt    QEMU
======================================  =========  ======
mdevs (vGPUs, ...)                      8.6.0      8.1.0
PCI devices (vfio-pci variant drivers)  10.0.0     8.2.2
======================================  =========  ======

Both ends of a move must meet the minimum of every kind of device the
instance holds, and both must run QEMU: the other hypervisors libvirt
drives (including its ``test`` driver) cannot migrate devices.

Invariant: :func:`problems` never raises and returns one line per host and
minimum that falls short, naming the host, its role, what it runs and what
is needed (``nova_pci_mdev.compute.live_move`` raises them all at once as a
:class:`~nova_pci_mdev.exception.LiveMigrationRefused`).
"""

import dataclasses

from nova_pci_mdev import exception

QEMU = 'QEMU'


@dataclasses.dataclass(frozen=True)
class Minimum:
    """The oldest libvirt and QEMU that can live-migrate ``what``."""

    what: str
    libvirt: tuple
    qemu: tuple

    def __str__(self):
        return '%s needs libvirt >= %s and QEMU >= %s' % (
            self.what, to_string(self.libvirt), to_string(self.qemu))


#: Nova's MIN_MDEV_LIVEMIG_LIBVIRT_VERSION / _QEMU_VERSION.
MDEV_LIVE_MIGRATION = Minimum('live migration of mdevs', (8, 6, 0),
                              (8, 1, 0))
#: Nova's MIN_VFIO_PCI_VARIANT_LIBVIRT_VERSION / _QEMU_VERSION.
PCI_LIVE_MIGRATION = Minimum(
    'live migration of PCI devices (vfio-pci variant drivers)', (10, 0, 0),
    (8, 2, 2))


def _is_count(part):
    return isinstance(part, int) and not isinstance(part, bool) and part >= 0


def from_int(number):
    """libvirt's ``major * 1,000,000 + minor * 1,000 + micro`` as a tuple."""
    if not _is_count(number):
        raise exception.InvalidValue(
            field='version', value=number,
            rule='libvirt reports versions as non-negative integers')
    return (number // 1000000, number // 1000 % 1000, number % 1000)


def to_string(version):
    return '.'.join(str(part) for part in version)


def _version(field, value):
    if (not isinstance(value, (list, tuple)) or len(value) != 3 or
            not all(_is_count(p) for p in value) or
            not all(p < 1000 for p in value[1:])):
        raise exception.InvalidValue(
            field=field, value=value,
            rule='expected [major, minor, micro]: non-negative integers, '
                 'minor and micro below 1000')
    return tuple(value)


@dataclasses.dataclass(frozen=True)
class HypervisorVersions:
    """What one compute host runs: libvirt, the hypervisor type and its
    version (QEMU's, for type ``QEMU``)."""

    libvirt: tuple
    hypervisor_type: str
    hypervisor: tuple

    @classmethod
    def from_libvirt(cls, lib_version, hv_type, hv_version):
        """From the integers and the type name a connection reports."""
        return cls(from_int(lib_version), str(hv_type), from_int(hv_version))

    def __str__(self):
        if self.hypervisor_type == QEMU:
            return 'libvirt %s and QEMU %s' % (
                to_string(self.libvirt), to_string(self.hypervisor))
        return 'libvirt %s and hypervisor %s %s (not QEMU)' % (
            to_string(self.libvirt), self.hypervisor_type,
            to_string(self.hypervisor))

    def meets(self, minimum):
        return (self.hypervisor_type == QEMU and
                self.libvirt >= minimum.libvirt and
                self.hypervisor >= minimum.qemu)

    def to_dict(self):
        return {'libvirt': list(self.libvirt),
                'hypervisor_type': self.hypervisor_type,
                'hypervisor': list(self.hypervisor)}

    @classmethod
    def from_dict(cls, data, field='versions'):
        if not isinstance(data, dict) or set(data) != {
                'libvirt', 'hypervisor_type', 'hypervisor'}:
            raise exception.InvalidValue(
                field=field, value=data,
                rule='expected an object with exactly libvirt, '
                     'hypervisor_type and hypervisor')
        hv_type = data['hypervisor_type']
        if not isinstance(hv_type, str) or not hv_type:
            raise exception.InvalidValue(
                field=field + '.hypervisor_type', value=hv_type,
                rule='expected a non-empty string such as "QEMU"')
        return cls(_version(field + '.libvirt', data['libvirt']), hv_type,
                   _version(field + '.hypervisor', data['hypervisor']))


def problems(hosts, minimums):
    """One line per (role, host name, HypervisorVersions) in ``hosts``
    that misses one of ``minimums``."""
    out = []
    for role, name, versions in hosts:
        for minimum in minimums:
            if not versions.meets(minimum):
                out.append('%s; the %s host %s has %s' % (
                    minimum, role, name, versions))
    return out
