"""Discovery on a libvirt host: devices, mdevs and NUMA topology.

This is the only module of the project that imports ``libvirt``, and it
does so lazily (:func:`_libvirt`): the connection is injected (real
``qemu:///system``, the real ``test:///<file>`` driver, or a fake). What a
connection must offer: ``listAllDevices(flags)`` (devices with ``name()``
and ``XMLDesc(0)``), ``getCapabilities()``, ``getHostname()`` and
``getLibVersion()``.

Discovery (:meth:`Host.discover`) makes one ``listAllDevices`` call with
the PCI_DEV, MDEV_TYPES and MDEV capability flags (a virtual parent such
as ``mtty`` appears only under MDEV_TYPES), parses every device once
(:mod:`.nodedev`) and hands them to :func:`.records.build_records` (pure,
dict lookups only): linear in the number of devices and slots. The record
format is described in :mod:`.records`.

Libvirt errors are wrapped exactly once, in
:class:`~nova_pci_mdev.exception.HypervisorError` naming the device (or
``connection``/``host capabilities``); project exceptions pass unchanged.

A lost connection (libvirtd restarted) is reopened through the injected
``reconnect`` callable: a connection-level call that fails because the
connection is gone reopens it once and is retried once; a call on a node
device handle of the dead connection fails, and the next connection-level
call (the next operation) reopens it.
"""

import contextlib
import dataclasses
import sys
import typing

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import records as records_mod

#: libvirt's values of the listAllDevices flags we use (stable ABI); the
#: real module's constants win when it is importable.
_FLAG_FALLBACK = {
    'VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV': 1 << 1,
    'VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES': 1 << 13,
    'VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV': 1 << 14,
}

_error_handler_installed = False


def _libvirt():
    """The ``libvirt`` module, or None when libvirt-python is missing."""
    try:
        import libvirt
    except ImportError:
        return None
    return libvirt


def _install_error_handler(module):
    """Silence libvirt's default stderr printing, once per process."""
    global _error_handler_installed
    if module is not None and not _error_handler_installed:
        module.registerErrorHandler(lambda *args: None, None)
        _error_handler_installed = True


def _flag(name):
    module = _libvirt()
    return getattr(module, name, _FLAG_FALLBACK[name])


def _is_libvirt_error(exc):
    module = _libvirt()
    if module is not None and isinstance(exc, module.libvirtError):
        return True
    # Doubles (the project's fake libvirt) raise their own class with the
    # same accessor.
    return callable(getattr(exc, 'get_error_code', None))


def _is_active(dev):
    """``dev.isActive()``; True when the driver cannot tell (libvirt < 7.3
    lists active mdevs only; the 9.0 test driver lacks the call)."""
    try:
        return bool(dev.isActive())
    except AttributeError:
        return True
    except Exception as exc:
        if _is_libvirt_error(exc):
            return True
        raise


def _wrapped(exc, device):
    """The :class:`~nova_pci_mdev.exception.HypervisorError` for libvirt
    error ``exc`` of a call about ``device``; None for any other exception
    (project errors included), which the caller re-raises as it is."""
    if (isinstance(exc, exception.NovaPciMdevException)
            or not _is_libvirt_error(exc)):
        return None
    code = exc.get_error_code()
    return exception.HypervisorError(
        device=device, reason='%s (libvirt error code %s)' % (exc, code),
        code=code)


@contextlib.contextmanager
def _hypervisor_call(device):
    try:
        yield
    except Exception as exc:
        wrapped = _wrapped(exc, device)
        if wrapped is None:
            raise
        raise wrapped from exc


def _describe(dev):
    """``(name, XMLDesc(0))`` of a listed node device, libvirt errors
    wrapped naming the device (a plain try: this runs once per device)."""
    name = 'node device'
    try:
        name = dev.name()
        return name, dev.XMLDesc(0)
    except Exception as exc:
        wrapped = _wrapped(exc, name)
        if wrapped is None:
            raise
        raise wrapped from exc


_MISSING = object()


def _connection_lost(exc, conn):
    """True when libvirt error ``exc`` means that ``conn`` is gone.

    Codes are read from the module of the error's class (the real
    ``libvirt`` or a fake with its own values): VIR_ERR_NO_CONNECT, or
    VIR_ERR_SYSTEM_ERROR / VIR_ERR_INTERNAL_ERROR raised by the RPC or
    remote layer; otherwise the connection's own ``isAlive()`` decides (a
    libvirt error from it, e.g. on a closed connection, means lost too).
    """
    module = sys.modules.get(type(exc).__module__)

    def const(name):
        return getattr(module, name, _MISSING)

    code = exc.get_error_code()
    if code == const('VIR_ERR_NO_CONNECT'):
        return True
    domain_of = getattr(exc, 'get_error_domain', None)
    domain = domain_of() if callable(domain_of) else None
    if (code in (const('VIR_ERR_SYSTEM_ERROR'),
                 const('VIR_ERR_INTERNAL_ERROR'))
            and domain in (const('VIR_FROM_RPC'), const('VIR_FROM_REMOTE'))):
        return True
    try:
        return not conn.isAlive()
    except Exception as check:
        return _is_libvirt_error(check)


def connect(uri, nodename=None):
    """A :class:`Host` on ``libvirt.open(uri)`` (read-write); it reopens
    ``uri`` when the connection is lost."""
    module = _libvirt()
    if module is None:
        raise exception.HypervisorError(
            device=uri, reason='libvirt-python is not installed')
    _install_error_handler(module)

    def reopen():
        return module.open(uri)

    with _hypervisor_call(uri):
        conn = reopen()
    return Host(conn, nodename=nodename, reconnect=reopen)


class MdevLocation(typing.NamedTuple):
    """Where an mdev lives: its parent's address (None if unknown), type."""

    parent_addr: str | None
    mdev_type: str


# -- the connection wrapper ------------------------------------------------

class Host:
    """Discovery on one injected libvirt connection.

    ``nodename`` names the compute node (it seeds slot UUIDs); it defaults
    to the connection's hostname. ``reconnect`` (optional) returns a new
    connection; without it a lost connection stays lost. ``connection`` is
    always the current connection.
    """

    def __init__(self, conn, nodename=None, reconnect=None):
        if conn is None:
            raise exception.InvalidValue(field='connection', value=conn,
                                         rule='expected a libvirt connection')
        self._conn = conn
        self._nodename = nodename
        self._reconnect = reconnect
        _install_error_handler(_libvirt())

    @property
    def connection(self):
        return self._conn

    def _call(self, device, method, *args):
        """``self.connection.<method>(*args)``, errors wrapped naming
        ``device``; on a lost connection, reopen once and retry once."""
        try:
            with _hypervisor_call(device):
                return getattr(self._conn, method)(*args)
        except exception.HypervisorError as exc:
            cause = exc.__cause__
            if (self._reconnect is None or cause is None
                    or not _connection_lost(cause, self._conn)):
                raise
        with _hypervisor_call(device):
            self._reopen()
            return getattr(self._conn, method)(*args)

    def _reopen(self):
        old = self._conn
        self._conn = self._reconnect()
        try:
            old.close()
        except Exception:
            pass            # it is dead already

    def live_connection(self):
        """The current connection, first reopened (when ``reconnect`` is
        set) if it is no longer alive. For collaborators that make their
        own calls on the connection (the libvirt mdev backend)."""
        if self._reconnect is not None:
            try:
                alive = self._conn.isAlive()
            except Exception as exc:
                if not _is_libvirt_error(exc):
                    raise
                alive = False
            if not alive:
                with _hypervisor_call('connection'):
                    self._reopen()
        return self._conn

    @property
    def hostname(self):
        if self._nodename is None:
            self._nodename = self._call('connection', 'getHostname')
        return self._nodename

    @property
    def lib_version(self):
        """libvirt's version as an integer (major * 1e6 + minor * 1e3 +
        micro)."""
        return self._call('connection', 'getLibVersion')

    @property
    def hypervisor_type(self):
        """The hypervisor libvirt drives: ``QEMU``, ``TEST``..."""
        return self._call('connection', 'getType')

    @property
    def hypervisor_version(self):
        """The hypervisor's version, encoded as :attr:`lib_version`."""
        return self._call('connection', 'getVersion')

    def has_min_version(self, major, minor=0, micro=0):
        return self.lib_version >= major * 1000000 + minor * 1000 + micro

    def _list(self, flags):
        return self._call('connection', 'listAllDevices', flags)

    def devices(self, flags=None):
        """Parsed node devices (:mod:`.nodedev` objects) of one listing.

        ``flags`` defaults to PCI_DEV | MDEV_TYPES | MDEV. Devices of other
        kinds are dropped.
        """
        if flags is None:
            flags = (_flag('VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV')
                     | _flag('VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES')
                     | _flag('VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV'))
        parsed = []
        for dev in self._list(flags):
            name, xml = _describe(dev)
            item = nodedev.parse_node_device(xml, device_name=name)
            if isinstance(item, nodedev.Mdev) and not _is_active(dev):
                item = dataclasses.replace(item, active=False)
            if item is not None:
                parsed.append(item)
        return parsed

    def discover(self, settings, held=()):
        """Device records of the host for the tracker.

        ``held``: ``(uuid, parent_addr, mdev_type)`` of slots instances
        hold. One that the host does not list (it vanished and could not be
        recreated yet) is counted like a defined but stopped mdev: it keeps
        its slot and one of the parent's available instances, so that its
        capacity is never offered as a fresh slot.
        """
        devices = self.devices()
        return records_mod.build_records(
            self.hostname,
            devices + records_mod.vanished_stand_ins(devices, held),
            settings)

    def numa_topology(self, sidecar=None):
        """The host's NUMA cells; from ``sidecar`` (a JSON file path) only
        when the host reports no cells."""
        xml = self._call('host capabilities', 'getCapabilities')
        topology = capabilities.parse_topology(xml)
        if not topology.cells and sidecar is not None:
            return capabilities.load_topology_sidecar(sidecar)
        return topology

    def list_mdevs(self):
        """``{uuid: MdevLocation(parent_addr, mdev_type)}`` of every active
        mdev (defined but stopped ones are left out)."""
        found = self.devices(
            _flag('VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES')
            | _flag('VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV'))
        address_of = {d.name: d.address for d in found
                      if not isinstance(d, nodedev.Mdev)}
        return {d.uuid: MdevLocation(
                    records_mod.mdev_parent_address(d, address_of),
                    d.mdev_type)
                for d in found if isinstance(d, nodedev.Mdev) and d.active}
