"""What a claim is made of: the pure pieces of :class:`~.compute.ComputeHost`.

A claim first takes devices in the tracker (a :class:`Choice`), then makes
them real on the host and records them; :class:`ClaimResult` is what the
caller gets back, with one guest ``<hostdev>`` per device
(:func:`hostdev_for`), and :func:`record` the consumer's store record.
Pure: no I/O, no tracker changes.
"""

import dataclasses

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

DevType = fields.PciDeviceType


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    instance_uuid: str
    devices: tuple           # PciDevice objects, in request order
    numa_cells: tuple | None  # HostCell ids the instance was fitted to
    allocations: dict        # provider uuid -> {rc: amount}
    hostdevs: tuple          # LibvirtConfigGuestHostdev* objects
    created_mdevs: tuple     # UUIDs of mdevs this claim created
    removed_mdevs: tuple = ()  # UUIDs of free mdevs of parents used whole
    dry_run: bool = False
    vgpu_types_set: tuple = ()  # NVIDIA VFs whose vGPU type this claim set

    def devices_xml(self):
        """The guest's ``<devices>`` element with one hostdev per device."""
        return vconfig.devices_xml(self.hostdevs)


@dataclasses.dataclass(frozen=True)
class Choice:
    """Devices a claim took in the tracker (alias path first, then the
    Placement path's slots), the NUMA cells and the allocations."""

    devices: tuple
    cells: tuple | None
    allocations: dict


def slot_of(dev):
    """The (uuid, parent, type) an mdev slot device stands for."""
    return (dev.address, dev.parent_addr, dev.mdev_type)


def cell_ids(cells):
    return tuple(c.id for c in cells) if cells else None


def missing_mdevs(devices):
    """UUIDs of the allocated mdev slots among ``devices`` whose mdev the
    host does not run (vanished, or defined but stopped); those it lists
    under another parent or type are :func:`moved_mdevs` instead."""
    return tuple(d.address for d in devices
                 if d.dev_type == DevType.MDEV_VF
                 and d.status == fields.PciDeviceStatus.ALLOCATED
                 and not extra_info.is_true(d.extra_info,
                                            extra_info.MDEV_EXISTS)
                 and device_table.listed_under(d) is None)


def moved_mdevs(devices):
    """UUIDs of the slots in use among ``devices`` whose mdev the host
    lists under another parent or type than their claim holds them on
    (the tracker keeps them where they were claimed: :mod:`.pci.
    held_back`)."""
    return tuple(dev.address for dev in devices
                 if dev.dev_type == DevType.MDEV_VF
                 and device_table.listed_under(dev) is not None)


def record(flavor, choice, extra=None):
    """The store record of a consumer that holds ``choice``."""
    cells = cell_ids(choice.cells)
    return dict(extra or {},
                numa_cells=list(cells) if cells else None,
                allocations=choice.allocations,
                devices=[d.address for d in choice.devices],
                pci_requests=[r.alias_name for r in flavor.pci_requests])


def hostdev_for(dev):
    """The guest hostdev config of one claimed device (an NVIDIA vGPU VF:
    see :func:`.nvidia.vf.guest_hostdev`)."""
    vgpu_vf = nvidia_vf.guest_hostdev(dev)
    if vgpu_vf is not None:
        return vgpu_vf
    if dev.dev_type == DevType.MDEV_VF:
        return vconfig.LibvirtConfigGuestHostdevMDEV(uuid=dev.address)
    if not names.is_pci_address(dev.address):
        raise exception.InvalidValue(
            field='device', value=dev.address,
            rule='a virtual mdev parent cannot be passed through whole')
    return vconfig.LibvirtConfigGuestHostdevPCI(address=dev.address)
