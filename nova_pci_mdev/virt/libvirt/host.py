"""Discovery on a libvirt host: devices, mdevs and NUMA topology.

The connection is injected (real ``qemu:///system``, the real
``test:///<file>`` driver, or the tests' fake) together with the
:class:`~.seam.Libvirt` it belongs to; this module does not import
``libvirt`` (:mod:`.seam` does). What a connection must offer:
``listAllDevices(flags)`` (devices with ``name()`` and ``XMLDesc(0)``),
``getCapabilities()``, ``getHostname()`` and ``getLibVersion()``.

Discovery (:meth:`Host.discover`) makes one ``listAllDevices`` call with
the PCI_DEV, MDEV_TYPES and MDEV capability flags (a virtual parent such
as ``mtty`` appears only under MDEV_TYPES), parses every device once
(:mod:`.nodedev`) and hands them to :func:`.records.build_records` (pure,
dict lookups only): linear in the number of devices and slots. The record
format is described in :mod:`.records`.

Libvirt errors are translated exactly once, by the seam
(:meth:`.seam.Libvirt.translate`), into
:class:`~nova_pci_mdev.exception.HypervisorError` naming the device (or
``connection``/``host capabilities``); project exceptions pass unchanged.

A lost connection (libvirtd restarted) is reopened through the injected
``reconnect`` callable: a connection-level call that fails because the
connection is gone reopens it once and is retried once; a call on a node
device handle of the dead connection fails, and the next connection-level
call (the next operation) reopens it.
"""

import dataclasses
import os
import typing

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import capabilities
from nova_pci_mdev.virt.libvirt import listing as listing_mod
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import records as records_mod
from nova_pci_mdev.virt.libvirt import seam
from nova_pci_mdev.virt.libvirt import uris


def connect(uri, nodename=None, libvirt=None):
    """A :class:`Host` on ``libvirt.open(uri)`` (read-write); it reopens
    ``uri`` when the connection is lost. ``libvirt``: the
    :class:`~.seam.Libvirt` to use (the real one by default).

    A ``test:///path`` host file that does not exist is refused here,
    naming it (HostDescriptionInvalid): libvirt's test driver would say
    "failed to parse xml document" after libxml2 printed its own line on
    stderr. An error of libvirt's open gets a note (:func:`.uris.hint`)
    when libvirt may have read ``uri`` otherwise than it was meant.
    """
    libvirt = libvirt or seam.real()
    path = uris.host_file(uri)
    if path is not None and not os.path.exists(path):
        raise exception.HostDescriptionInvalid(
            reason='the host file %s of connection %s does not exist'
                   % (path, uri))

    def reopen():
        return libvirt.open(uri)

    try:
        conn = reopen()
    except exception.HypervisorError as exc:
        note = uris.hint(uri)
        if note:
            exc.add_note(note)
        raise
    return Host(conn, nodename=nodename, reconnect=reopen, libvirt=libvirt)


class MdevLocation(typing.NamedTuple):
    """Where an mdev lives: its parent's address (None if unknown), type."""

    parent_addr: str | None
    mdev_type: str


def left_out(exc):
    """The NodeDeviceLeftOut warning of a NodeDeviceXMLInvalid."""
    return exception.NodeDeviceLeftOut(device=exc.kwargs.get('device'),
                                       reason=exc.kwargs.get('reason'))


class Host:
    """Discovery on one injected libvirt connection.

    ``nodename`` names the compute node (it seeds slot UUIDs); it defaults
    to the connection's hostname. ``reconnect`` (optional) returns a new
    connection; without it a lost connection stays lost. ``connection`` is
    always the current connection. ``libvirt`` is the :class:`~.seam.Libvirt`
    the connection belongs to (the real one by default; the tests' fake
    libvirt brings its own); :attr:`libvirt` hands it on to the other code
    that talks to this connection.
    """

    def __init__(self, conn, nodename=None, reconnect=None, libvirt=None):
        if conn is None:
            raise exception.InvalidValue(field='connection', value=conn,
                                         rule='expected a libvirt connection')
        self._conn = conn
        self._nodename = nodename
        self._reconnect = reconnect
        #: The warnings of the last listing (devices(), discover()): every
        #: node device left out (NodeDeviceLeftOut), every value capped
        #: (NodeDeviceValueCapped)
        self.left_out = []
        self.libvirt = libvirt or seam.real()

    @property
    def connection(self):
        return self._conn

    def _invoke(self, device, call, *args):
        """``call(*args)`` with libvirt errors translated naming
        ``device``; any other exception passes unchanged."""
        try:
            return call(*args)
        except Exception as exc:
            translated = self.libvirt.translate(exc, device)
            if translated is None:
                raise
            raise translated from exc

    def _call(self, device, method, *args):
        """``self.connection.<method>(*args)``, errors translated naming
        ``device``; on a lost connection, reopen once and retry once."""
        try:
            return getattr(self._conn, method)(*args)
        except self.libvirt.error_class as exc:
            if (self._reconnect is None
                    or not self.libvirt.connection_lost(exc, self._conn)):
                raise self.libvirt.translate(exc, device) from exc
        self._invoke(device, self._reopen)
        return self._invoke(device, getattr(self._conn, method), *args)

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
            except self.libvirt.error_class:
                alive = False
            if not alive:
                self._invoke('connection', self._reopen)
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

    def listing(self, flags=None):
        """One ``listAllDevices`` as libvirt gave it (a tuple of
        :class:`.listing.Entry`), nothing parsed.

        ``flags`` defaults to PCI_DEV | MDEV_TYPES | MDEV.
        """
        if flags is None:
            flags = self.libvirt.list_all
        entries = []
        for dev in self._list(flags):
            name, xml = self._describe(dev)
            active = (self._is_active(dev) if listing_mod.may_be_mdev(xml)
                      else None)
            entries.append(listing_mod.Entry(name, xml, active))
        return tuple(entries)

    def parse(self, entries):
        """Parsed node devices (:mod:`.nodedev` objects) of a listing;
        devices of other kinds are dropped, and one we cannot read does
        not make the host unusable: it is left out, and reported in
        :attr:`left_out` (reset by each call), as is every count that was
        capped."""
        parsed = []
        self.left_out = []
        for name, xml, active in entries:
            try:
                item = nodedev.parse_node_device(xml, device_name=name)
            except exception.NodeDeviceXMLInvalid as exc:
                self.left_out.append(left_out(exc))
                continue
            if active is False and isinstance(item, nodedev.Mdev):
                item = dataclasses.replace(item, active=False)
            if item is not None:
                parsed.append(item)
                if getattr(item, 'mdev_types', ()):
                    self.left_out.extend(records_mod.value_warnings(item))
        return parsed

    def devices(self, flags=None):
        """Parsed node devices of one listing (:meth:`listing`)."""
        return self.parse(self.listing(flags))

    def discovery_input(self):
        """What :meth:`discover` reads from libvirt, unparsed: pass it back
        as ``source`` (and hash it with :meth:`digest_input`)."""
        return self.listing()

    @staticmethod
    def digest_input(source, hasher):
        """Feed a :meth:`discovery_input` to ``hasher``."""
        return listing_mod.digest(source, hasher)

    @staticmethod
    def listed_mdevs(source):
        """UUIDs of mdevs a :meth:`discovery_input` surely lists (those
        whose node name carries it; a parsed mdev's UUID always equals
        its name's)."""
        return {uuid for name, xml, _active in source
                if listing_mod.may_be_mdev(xml)
                for uuid in (nodenames.mdev_uuid_from_name(name),) if uuid}

    def _describe(self, dev):
        """``(name, XMLDesc(0))`` of a listed node device, libvirt errors
        translated naming the device (a plain try: this runs once per
        device)."""
        name = 'node device'
        try:
            name = dev.name()
            return name, dev.XMLDesc(0)
        except self.libvirt.error_class as exc:
            raise self.libvirt.translate(exc, name) from exc

    def _is_active(self, dev):
        """``dev.isActive()``; True when the driver cannot tell (libvirt <
        7.3 lists active mdevs only; the 9.0 test driver lacks the call)."""
        try:
            return bool(dev.isActive())
        except (AttributeError, self.libvirt.error_class):
            return True

    def discover(self, settings, held=(), source=None):
        """Device records of the host for the tracker.

        ``held``: ``(uuid, parent_addr, mdev_type)`` of slots instances
        hold. One that the host does not list (it vanished and could not be
        recreated yet) is counted like a defined but stopped mdev: it keeps
        its slot and one of the parent's available instances, so that its
        capacity is never offered as a fresh slot. ``source``: a
        :meth:`discovery_input` already read (else libvirt is asked now).
        """
        devices = self._devices_of(
            self.discovery_input() if source is None else source)
        return records_mod.build_records(
            self.hostname, devices, settings, left_out=self.left_out,
            stand_ins=records_mod.vanished_stand_ins(devices, held))

    def _devices_of(self, source):
        return self.parse(source)

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
        found = self.devices(self.libvirt.list_mdev_types
                             | self.libvirt.list_mdev)
        address_of = {d.name: d.address for d in found if isinstance(
            d, (nodedev.PciFunction, nodedev.VirtualParent))}
        return {d.uuid: MdevLocation(
                    nodenames.parent_address(d, address_of), d.mdev_type)
                for d in found if isinstance(d, nodedev.Mdev) and d.active}
