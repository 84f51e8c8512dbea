"""vGPU types of NVIDIA VFs: policy over :class:`.nvidia.sysfs.NvidiaVfSysfs`.

What the compute host does with the ``current_vgpu_type`` of the VFs it
hands out (the mdev counterpart is :class:`~.mdev.MdevManager`):

* :meth:`VgpuVfManager.assign` before a guest is defined: every claimed VF
  gets its type, all or nothing. Each VF is read again just before its
  write (what it holds, what it can take now: a sibling's new vGPU may have
  used the capacity up) and read back after it.
* :meth:`VgpuVfManager.clear` when the devices are freed and when a spawn
  fails: every VF goes back to ``0``, all or nothing.
* :meth:`VgpuVfManager.restore` at service start: allocated VFs whose type
  vanished (a host reboot resets them) get it again, best effort per VF.

Invariants: a VF that holds another type than the one asked is never
overwritten; a VF that already holds the type asked is left alone by
:meth:`~VgpuVfManager.assign` and not counted as set by it, so a failed
claim only undoes its own writes; every name and id is validated (through
:mod:`.nvidia.sysfs`) before anything is written.
"""

import typing

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

Status = fields.PciDeviceStatus


class RestoreReport(typing.NamedTuple):
    """Outcome of :meth:`VgpuVfManager.restore`."""

    restored: list      # VF addresses whose type was written again
    failed: dict        # address -> NovaPciMdevException


def _pair(slot):
    """Validate one ``(address, mdev_type)``; return ``(address, id)``."""
    if not isinstance(slot, (tuple, list)) or len(slot) != 2:
        raise exception.InvalidValue(
            field='vGPU VF slot', value=slot,
            rule='expected (VF address, nvidia-<id>)')
    return (nvidia_sysfs.vf_address(slot[0]),
            nvidia_vf.type_id_of(slot[1]))


def _pairs(slots):
    """Validate ``[(address, mdev_type)]``; return ``[(address, id)]``."""
    out = []
    seen = set()
    for slot in slots:
        address, type_id = _pair(slot)
        if address in seen:
            raise exception.InvalidValue(
                field='vGPU VF address', value=address,
                rule='each VF may appear once per call')
        seen.add(address)
        out.append((address, type_id))
    return out


def typed_slots(devices):
    """``[(address, mdev_type)]`` of the vGPU VFs among ``devices`` that
    carry a type (PciDevice objects); plain VFs of a GPU without an exposed
    type are passed as they are, as Nova 34 would."""
    return [(d.address, d.mdev_type) for d in devices
            if nvidia_vf.is_vgpu_vf(d) and d.mdev_type]


class VgpuVfManager(object):
    """Sets and drops the vGPU types of VFs (see the module docstring).

    ``sysfs`` None: the host has no such VFs (no sysfs is ever read); the
    device-level methods then do nothing.
    """

    def __init__(self, sysfs=None):
        self.sysfs = sysfs

    def states(self, addresses):
        return self.sysfs.states(addresses) if self.sysfs else {}

    # -- what the compute host calls, with device records / objects --------

    def view(self, records, settings):
        """Discovery records with the vGPU view of their GPUs (one
        directory check per NVIDIA VF, see :func:`.nvidia.vf.apply`)."""
        if self.sysfs is None:
            return records
        states = self.states(nvidia_vf.candidate_addresses(records))
        return nvidia_vf.apply(records, states, settings) if states else (
            records)

    def restore_held(self, devices, recreated):
        """:meth:`restore` for the allocated vGPU VFs among ``devices``;
        returns the :class:`~.mdev.RecreateReport` ``recreated`` (of the
        mdevs) extended with the VF addresses restored or failed."""
        slots = typed_slots(d for d in devices
                            if d.status == Status.ALLOCATED)
        if self.sysfs is None or not slots:
            return recreated
        done = self.restore(slots)
        return mdev.RecreateReport(recreated.recreated + done.restored,
                                   dict(recreated.failed, **done.failed))

    def assign_devices(self, devices):
        """:meth:`assign` for the vGPU VFs among claimed ``devices``."""
        slots = typed_slots(devices)
        return self.assign(slots) if slots else []

    def clear_devices(self, devices):
        """:meth:`clear` for the vGPU VFs among ``devices``."""
        addresses = [a for a, _t in typed_slots(devices)]
        return self.clear(addresses) if addresses else []

    def undo(self, addresses):
        """Drop the types :meth:`assign_devices` set, for a failed caller.
        Never raises (but for ``BaseException``): returns one line per VF
        left with its type, for the caller to report with its own error."""
        failures = []
        for address in addresses:
            try:
                self.clear([address])
            except Exception as exc:
                failures.append('NVIDIA VF %s keeps the vGPU type this '
                                'claim set: %s' % (address, exc))
        return failures

    def _state(self, address):
        state = self.sysfs.state(address)
        if state is None:
            raise exception.VgpuVfError(
                address=address, errno='ENOENT',
                reason='no %s/ directory: not a VF of NVIDIA\'s vendor-'
                       'specific VFIO framework (is SR-IOV enabled on its '
                       'GPU?)' % nvidia_vf.SYSFS_DIR)
        return state

    def _set(self, address, type_id):
        """Give one VF ``type_id``; True if written, False if it held it."""
        state = self._state(address)
        wanted = nvidia_vf.type_name(type_id)
        if state.current == type_id:
            return False
        if state.current:
            raise exception.VgpuVfError(
                address=address, errno='EBUSY',
                reason='holds vGPU type %s, refusing to replace it by %s'
                       % (state.current_type, wanted))
        if not state.can_take(type_id):
            raise exception.VgpuTypeNotCreatable(
                address=address, mdev_type=wanted,
                reason='the driver lists %s' % (', '.join(
                    t.mdev_type for t in state.creatable) or 'no type'))
        back = self.sysfs.write_type(address, type_id)
        if back != type_id:
            raise exception.VgpuVfError(
                address=address, errno=None,
                reason='wrote %d to %s, read back %d' % (
                    type_id, nvidia_vf.CURRENT_FILE, back))
        return True

    def _drop(self, address):
        """Drop one VF's type; return the id it held (0: it held none)."""
        state = self._state(address)
        if state.current == 0:
            return 0
        back = self.sysfs.write_type(address, 0)
        if back != 0:
            raise exception.VgpuVfError(
                address=address, errno='EBUSY',
                reason='wrote 0 to %s, it still holds %d (is the guest '
                       'still running?)' % (nvidia_vf.CURRENT_FILE, back))
        return state.current

    def assign(self, slots):
        """Give every ``(VF address, nvidia-<id>)`` its type; return the
        addresses written by this call. On failure the VFs written by this
        call are cleared again and the error is raised (naming those it
        could not clear)."""
        done = []
        for address, type_id in _pairs(slots):
            try:
                if self._set(address, type_id):
                    done.append(address)
            except exception.NovaPciMdevException as exc:
                raise self._undone(exc, [(a, 0) for a in done])
        return done

    def clear(self, addresses):
        """Drop the type of every VF; return ``[(address, mdev_type)]`` of
        those that held one. All or nothing: on failure the VFs cleared by
        this call get their type back and the error is raised."""
        done = []
        for address in [nvidia_sysfs.vf_address(a) for a in addresses]:
            try:
                held = self._drop(address)
            except exception.NovaPciMdevException as exc:
                raise self._undone(exc, done)
            if held:
                done.append((address, held))
        return [(a, nvidia_vf.type_name(i)) for a, i in done]

    def _undone(self, exc, writes):
        """Write back ``[(address, id)]``; return ``exc`` naming failures."""
        left = []
        for address, type_id in reversed(writes):
            try:
                if self.sysfs.write_type(address, type_id) != type_id:
                    left.append((address, 'read back another type'))
            except exception.NovaPciMdevException as err:
                left.append((address, err))
        if not left:
            return exc
        kwargs = dict(exc.kwargs)
        kwargs['reason'] = '%s; could not undo %s' % (
            kwargs.get('reason', exc), ', '.join(
                '%s (%s)' % (a, e) for a, e in left))
        kwargs['left_behind'] = [a for a, _ in left]
        return type(exc)(**kwargs)

    def restore(self, slots):
        """Give allocated VFs their type again where it vanished (reboot).

        Best effort per VF: one holding its type is left alone, one holding
        another type or refusing the write is reported in ``failed``.
        """
        restored = []
        failed = {}
        for slot in slots:
            try:
                address, type_id = _pair(slot)
            except exception.Invalid as exc:
                # A stored record that breaks the rules: report it, and
                # write nothing for it.
                failed[str(slot[0] if isinstance(slot, tuple) and slot
                           else slot)] = exc
                continue
            try:
                if self._set(address, type_id):
                    restored.append(address)
            except exception.NovaPciMdevException as exc:
                failed[address] = exc
        return RestoreReport(restored, failed)
