"""Mediated device lifecycle: one small backend interface and its manager.

A backend creates, removes and lists mdevs on one host. Three
implementations share the interface:

* :class:`~.sysfs_backend.SysfsBackend`: the kernel's sysfs
  (``<root>/sys/class/mdev_bus/...``), root configurable;
* :class:`~.libvirt_backend.LibvirtNodeDeviceBackend`:
  libvirt node devices (persistent mdevs with autostart on libvirt >= 7.3);
* :class:`~nova_pci_mdev.virt.libvirt.emulated.mdevs.EmulatedBackend`: mdevs
  kept in a JSON file, for ``test://`` connections and as the test double.

Invariants every backend keeps:

* Every name that reaches the host (UUID, parent address or name, type) is
  validated with :mod:`nova_pci_mdev.names` *before* any I/O, through
  :func:`mdev_info`; a bad name raises an ``Invalid`` subclass and touches
  nothing.
* ``parent`` is always the device address of the parent as in the device
  records: a lower-case PCI address (``0000:84:00.0``) or a virtual parent
  name (``mtty``), never a libvirt node-device name.
* Failures of the host raise :class:`~nova_pci_mdev.exception.MdevError`
  (or its subclasses ``MdevNotFound`` / ``MdevTypeError``) naming the UUID,
  the parent and the reason; ``exc.kwargs['errno']`` holds the symbolic
  errno (``EBUSY``...) when the host gave one.

:class:`MdevManager` adds the policy on top: create what is missing and roll
back on failure, recreate what vanished after a reboot, never remove an
assigned mdev.
"""

import abc
import errno as errno_mod
import os
import typing

from nova_pci_mdev import exception
from nova_pci_mdev import names


class MdevInfo(typing.NamedTuple):
    """One mdev: its UUID, its parent's address and its type."""

    uuid: str
    parent: str
    mdev_type: str


def mdev_info(uuid, parent, mdev_type):
    """Return a validated, normalised :class:`MdevInfo` or raise ``Invalid``.

    The UUID must be a UUID (lower-cased), the parent a PCI address
    (lower-cased) or a virtual parent name, the type a safe type name; each
    comes out as one path component without ``/``, NUL or ``..``.
    """
    return MdevInfo(names.normalize_uuid(uuid),
                    names.normalize_address(parent),
                    names.validate_mdev_type(mdev_type))


def as_info(slot):
    """Validate a slot: :class:`MdevInfo` or ``(uuid, parent, type)``."""
    try:
        uuid, parent, mdev_type = slot
    except (TypeError, ValueError):
        raise exception.InvalidValue(
            field='mdev slot', value=slot,
            rule='expected (uuid, parent, mdev_type)')
    return mdev_info(uuid, parent, mdev_type)


def errno_name(err):
    """``errno.EBUSY`` -> ``'EBUSY'``; unknown numbers as ``'errno N'``."""
    return errno_mod.errorcode.get(err, 'errno %s' % err)


def os_error(exc, uuid, parent, action, enoent=exception.MdevError):
    """Turn an ``OSError`` of ``action`` into an :class:`MdevError`.

    The message names the action, the errno text and its symbolic name, for
    example ``create of type nvidia-35 failed: Device or resource busy
    (EBUSY)``; ``kwargs['errno']`` holds the symbolic name. ``ENOENT``
    raises ``enoent`` (``MdevNotFound`` when the mdev itself is missing).
    """
    code = exc.errno
    text = os.strerror(code) if code is not None else str(exc)
    name = errno_name(code) if code is not None else None
    cls = enoent if code == errno_mod.ENOENT else exception.MdevError
    return cls(uuid=uuid, parent=parent, errno=name,
               reason='%s failed: %s (%s)' % (action, text, name))


class MdevBackend(abc.ABC):
    """The lifecycle interface. Implementations do the I/O, no policy."""

    @abc.abstractmethod
    def list(self):
        """Return ``{uuid: MdevInfo}`` of the mdevs that exist now."""

    @abc.abstractmethod
    def create(self, uuid, parent, mdev_type):
        """Create mdev ``uuid`` of ``mdev_type`` on ``parent``.

        Raises ``Invalid`` for a bad name (before any I/O) and ``MdevError``
        when the host refuses (UUID in use, no instance left, busy...).
        """

    @abc.abstractmethod
    def remove(self, uuid):
        """Remove mdev ``uuid``; ``MdevNotFound`` if it does not exist."""

    @abc.abstractmethod
    def available(self, parent, mdev_type):
        """Return how many more mdevs of ``mdev_type`` ``parent`` can create.

        Raises ``MdevTypeError`` when the parent does not expose the type.
        """


class RecreateReport(typing.NamedTuple):
    """Outcome of :meth:`MdevManager.recreate_vanished`."""

    recreated: list     # UUIDs created again, in the order given
    failed: dict        # uuid -> MdevError, for slots that could not be


class MdevManager:
    """Policy over a backend. Every call lists the host once (linear).

    * :meth:`ensure` is all-or-nothing for one call: it creates the missing
      mdevs of the given slots and, if one creation fails, removes those it
      created before raising. Slots that already exist are left alone; a
      slot whose UUID exists on another parent or with another type is an
      error raised before anything is created.
    * :meth:`recreate_vanished` is best effort per slot (used at start-up:
      slots of different instances are independent).
    * :meth:`remove_unassigned` never removes an assigned mdev.
    * :meth:`clear_parents` is all-or-nothing too: it removes every mdev of
      the given parents or, if one removal fails, recreates those it
      removed before raising; it refuses before removing anything when one
      of them is assigned.
    * :meth:`undo` reverses :meth:`ensure` and :meth:`clear_parents` for a
      caller whose later step failed, and reports what it could not undo
      instead of raising.
    """

    def __init__(self, backend):
        self.backend = backend

    def _plan(self, slots):
        """Validate ``slots``; return (wanted, existing, missing)."""
        wanted = []
        seen = set()
        for slot in slots:
            info = as_info(slot)
            if info.uuid in seen:
                raise exception.InvalidValue(
                    field='mdev slot UUID', value=info.uuid,
                    rule='each slot UUID may appear once per call')
            seen.add(info.uuid)
            wanted.append(info)
        existing = self.backend.list()
        missing = [info for info in wanted if info.uuid not in existing]
        return wanted, existing, missing

    @staticmethod
    def _mismatch(info, have):
        return exception.MdevError(
            uuid=info.uuid, parent=info.parent, errno='EEXIST',
            reason='an mdev with this UUID exists on parent %s with type %s, '
                   'expected type %s on this parent'
                   % (have.parent, have.mdev_type, info.mdev_type))

    def ensure(self, slots):
        """Make sure an mdev exists for every slot; return the UUIDs created.

        ``slots`` are :class:`MdevInfo` or ``(uuid, parent, mdev_type)``.
        On failure the mdevs created by this call are removed again and the
        error is raised (if that removal fails too, the raised
        ``MdevError`` names the UUIDs left behind).
        """
        wanted, existing, missing = self._plan(slots)
        for info in wanted:
            have = existing.get(info.uuid)
            if have is not None and have != info:
                raise self._mismatch(info, have)
        created = []
        try:
            for info in missing:
                self.backend.create(*info)
                created.append(info.uuid)
        except BaseException as exc:
            left = self._rollback(created)
            if left and isinstance(exc, exception.MdevError):
                kwargs = dict(exc.kwargs)
                kwargs['reason'] = '%s; rollback could not remove %s' % (
                    kwargs.get('reason', exc), ', '.join(
                        '%s (%s)' % (u, e) for u, e in left))
                kwargs['left_behind'] = [u for u, _ in left]
                raise type(exc)(**kwargs) from exc
            raise
        return created

    def _rollback(self, created):
        """Remove ``created`` (newest first); return [(uuid, error)] left."""
        left = []
        for uuid in reversed(created):
            try:
                self.backend.remove(uuid)
            except exception.MdevNotFound:
                pass
            except exception.MdevError as exc:
                left.append((uuid, exc))
        return left

    def recreate_vanished(self, allocated_slots):
        """Recreate allocated slots whose mdev vanished (host reboot).

        Each vanished slot is created again with its own UUID on its own
        parent. A failure is recorded and the next slot is tried; nothing is
        rolled back. Slots whose UUID exists with another parent or type are
        reported as failed, naming where it came back, and left alone.
        """
        wanted, existing, missing = self._plan(allocated_slots)
        failed = {}
        for info in wanted:
            have = existing.get(info.uuid)
            if have is not None and have != info:
                failed[info.uuid] = exception.MdevError(
                    uuid=info.uuid, parent=info.parent, errno='EEXIST',
                    reason='it came back on parent %s with type %s, not on '
                           'its parent %s with type %s; an allocation never '
                           'moves (same UUID on the same parent): remove '
                           'that mdev, then restore recreates it here'
                           % (have.parent, have.mdev_type, info.parent,
                              info.mdev_type))
        recreated = []
        for info in missing:
            try:
                self.backend.create(*info)
            except exception.MdevError as exc:
                failed[info.uuid] = exc
            else:
                recreated.append(info.uuid)
        return RecreateReport(recreated, failed)

    def remove_unassigned(self, uuid, assigned_uuids):
        """Remove mdev ``uuid`` unless it is assigned; True if removed.

        ``assigned_uuids`` are the UUIDs held by instances (any case). An
        assigned UUID raises ``MdevError`` and is not touched; an mdev that
        does not exist returns False.
        """
        uuid = names.normalize_uuid(uuid)
        have = self.backend.list().get(uuid)
        if uuid in _uuid_set(assigned_uuids):
            raise exception.MdevError(
                uuid=uuid, parent=have.parent if have else 'unknown',
                errno='EBUSY',
                reason='refusing to remove an mdev assigned to an instance')
        if have is None:
            return False
        try:
            self.backend.remove(uuid)
        except exception.MdevNotFound:
            return False
        return True

    def clear_parents(self, parents, assigned_uuids):
        """Remove every mdev of ``parents`` (addresses) before they are
        passed through whole; return the removed :class:`MdevInfo` (give
        them to :meth:`restore` to undo).

        A parent hosting an assigned mdev (``assigned_uuids``) raises
        ``MdevError`` (EBUSY) before anything is removed.
        """
        parents = {names.normalize_address(p) for p in parents}
        if not parents:
            return []
        assigned = _uuid_set(assigned_uuids)
        doomed = sorted((info for info in self.backend.list().values()
                         if info.parent in parents), key=lambda i: i.uuid)
        for info in doomed:
            if info.uuid in assigned:
                raise exception.MdevError(
                    uuid=info.uuid, parent=info.parent, errno='EBUSY',
                    reason='the parent is to be passed through whole but '
                           'this mdev of it is assigned to an instance')
        removed = []
        try:
            for info in doomed:
                try:
                    self.backend.remove(info.uuid)
                except exception.MdevNotFound:
                    continue
                removed.append(info)
        except BaseException:
            self.restore(removed)
            raise
        return removed

    def restore(self, infos):
        """Recreate mdevs removed by :meth:`clear_parents` (best effort:
        returns ``{uuid: MdevError}`` of those that could not be)."""
        failed = {}
        for info in infos:
            try:
                self.backend.create(*info)
            except exception.MdevError as exc:
                failed[info.uuid] = exc
        return failed

    def undo(self, created, removed):
        """Undo what a failed caller did: remove the mdevs ``created``
        (UUIDs) unless assigned, recreate ``removed`` (:class:`MdevInfo`
        from :meth:`clear_parents`). Never raises (but for
        ``BaseException``): returns one line per undo that failed, so that
        the caller can report them with its own, first, error."""
        failures = []
        for uuid in created:
            try:
                self.remove_unassigned(uuid, ())
            except Exception as exc:
                failures.append('mdev %s created by this claim was left '
                                'behind: %s' % (uuid, exc))
        try:
            not_restored = self.restore(removed)
        except Exception as exc:
            not_restored = {info.uuid: exc for info in removed}
        failures.extend('mdev %s removed by this claim could not be '
                        'recreated: %s' % item
                        for item in sorted(not_restored.items()))
        return failures


def _uuid_set(uuids):
    return {u.lower() for u in uuids if isinstance(u, str)}
