"""mdev lifecycle through libvirt node devices.

Create = ``nodeDeviceCreateXML`` (a transient mdev) and, on libvirt >= 7.3,
``nodeDeviceDefineXML`` + ``setAutostart(1)`` on the same XML, which makes it
persistent (it comes back after a host reboot). Remove = ``destroy`` (if
active) then ``undefine`` (if persistent). List = the active devices of
``listAllDevices(CAP_MDEV)``. A defined but inactive mdev (autostart failed
after a reboot) is started again by :meth:`create` with the same UUID.

Parents are addresses at this interface and node names in libvirt: a PCI
address maps to ``pci_dddd_bb_ss_f`` by formula; a virtual parent's node
name is looked up among the ``CAP_MDEV_TYPES`` devices (its address is the
sysfs name, which may differ from the node name) and cached.

Invariants: names are validated before any XML is built (so no name can
inject XML); node-device XML is parsed by :mod:`.nodedev` (no DTDs, no
entities) and built by :mod:`.config`; every libvirt error is translated
once by the seam (:meth:`.seam.Libvirt.translate`) and reported as
``MdevError`` naming the UUID, the parent and the node device, and nothing
this backend started is left behind when a later step fails. This module
does not import ``libvirt``: it is handed the :class:`~.seam.Libvirt` of
its connection.
"""

import logging

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt import config
from nova_pci_mdev.virt.libvirt import nodedev
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import seam
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev

LOG = logging.getLogger(__name__)

#: libvirt 7.3.0 added persistent mdevs (define / autostart / undefine).
MIN_PERSISTENT_MDEV_VERSION = 7003000


def mdev_device_xml(uuid, parent_node, mdev_type):
    """Node-device XML that creates mdev ``uuid`` under node ``parent_node``.

    All three are validated first (``parent_node`` as a device name), so
    none can carry markup.
    """
    info = mdev.mdev_info(uuid, parent_node, mdev_type)
    return config.LibvirtConfigNodeDeviceMdev(
        parent=info.parent, mdev_type=info.mdev_type,
        uuid=info.uuid).to_xml(pretty=False)


class LibvirtNodeDeviceBackend(mdev.MdevBackend):
    """mdevs managed by libvirt on connection ``conn``.

    ``libvirt``: the :class:`~.seam.Libvirt` of the connection (the real
    one by default; :attr:`.host.Host.libvirt` for the Host's connection).
    ``current`` (optional) returns the connection to use for each call,
    e.g. :meth:`.host.Host.live_connection`, so that the backend follows
    the Host when it reopens a lost connection; without it ``conn`` is used.
    """

    def __init__(self, conn, libvirt=None, current=None):
        self._first = conn
        self._current = current
        self._libvirt = libvirt or seam.real()
        self._errors = self._libvirt.error_class
        self._persistent = None
        self._virtual = None        # virtual parent address -> node name

    # -- helpers -----------------------------------------------------------

    @property
    def _conn(self):
        return self._current() if self._current is not None else self._first

    def _fail(self, uuid, parent, action, exc):
        return exception.MdevError(uuid=uuid, parent=parent, errno=None,
                                   reason=self._libvirt.reason(exc, action))

    def _describe(self, dev, what):
        """``(name, XMLDesc(0))`` of a listed device, or None if it vanished
        since the listing; any other libvirt error (a lost connection) is
        raised: taking it for "no such mdev" would make the manager
        recreate mdevs that exist."""
        try:
            return dev.name(), dev.XMLDesc(0)
        except self._errors as exc:
            if self._libvirt.is_gone(exc):
                return None
            raise self._libvirt.translate(exc, what, 'XMLDesc') from exc

    def _list(self, flags, what):
        try:
            return self._conn.listAllDevices(flags)
        except self._errors as exc:
            raise self._libvirt.translate(exc, what,
                                          'listAllDevices') from exc

    def persistent(self):
        """True when libvirt can define mdevs (>= 7.3); asked once."""
        if self._persistent is None:
            try:
                version = self._conn.getLibVersion()
            except self._errors as exc:
                raise self._libvirt.translate(
                    exc, 'libvirt connection', 'getLibVersion') from exc
            self._persistent = version >= MIN_PERSISTENT_MDEV_VERSION
        return self._persistent

    def _virtual_parents(self, refresh=False):
        """{address: node name} of virtual parents (cached)."""
        if self._virtual is None or refresh:
            found = {}
            for dev in self._list(self._libvirt.list_mdev_types,
                                  'mdev parents'):
                described = self._describe(dev, 'mdev parents')
                if described is None:
                    continue
                try:
                    parsed = nodedev.parse_node_device(described[1],
                                                       described[0])
                except (exception.Invalid,
                        exception.NodeDeviceXMLInvalid) as exc:
                    LOG.warning('Ignoring node device: %s', exc)
                    continue
                if isinstance(parsed, nodedev.VirtualParent):
                    found[parsed.address] = parsed.name
            self._virtual = found
        return self._virtual

    def _node_name(self, parent, refresh=False):
        """Node name of the parent at address ``parent`` (validated); None
        for a virtual parent libvirt does not list (its driver is not
        loaded): its node name cannot be guessed (libvirt 9.0 calls mtty
        ``mtty_mtty``). ``refresh`` skips the cache."""
        if names.is_pci_address(parent):
            return nodenames.pci_node_name(parent)
        node = None if refresh else self._virtual_parents().get(parent)
        if node is None:
            node = self._virtual_parents(refresh=True).get(parent)
        return node

    def _gone(self, parent):
        """True when ``parent`` is a virtual parent libvirt lists no more
        (asked after a failure: the cached node name may be stale)."""
        return (not names.is_pci_address(parent)
                and self._node_name(parent, refresh=True) is None)

    @staticmethod
    def _unlisted(parent):
        return ('libvirt lists no mdev parent with address %s (driver '
                'unloaded or device gone?)' % parent)

    def _address(self, found):
        """Address of the parent of a parsed :class:`nodedev.Mdev` (the
        virtual parents are listed again when the cached ones do not
        know it); its node name when nothing says."""
        by_node = {n: a for a, n in self._virtual_parents().items()}
        address = nodenames.parent_address(found, by_node)
        if address is None:
            by_node = {n: a for a, n in
                       self._virtual_parents(refresh=True).items()}
            address = nodenames.parent_address(found, by_node)
        return address or found.parent

    def _entries(self):
        """[(virNodeDevice, MdevInfo, active)] of every mdev node device."""
        entries = []
        for dev in self._list(self._libvirt.list_mdev, 'mdev node devices'):
            described = self._describe(dev, 'mdev node devices')
            if described is None:
                continue
            try:
                found = nodedev.parse_node_device(described[1], described[0])
                if not isinstance(found, nodedev.Mdev):
                    continue
                info = mdev.mdev_info(found.uuid, self._address(found),
                                      found.mdev_type)
            except (exception.Invalid, exception.NodeDeviceXMLInvalid) as exc:
                LOG.warning('Ignoring node device: %s', exc)
                continue
            entries.append((dev, info, self._state(dev, 'isActive', True)))
        return entries

    def _state(self, dev, method, default):
        """``dev.isActive()`` / ``isPersistent()``; ``default`` when libvirt
        is too old to answer (before 7.3 every listed mdev is active and
        none is persistent)."""
        try:
            return bool(getattr(dev, method)())
        except (self._errors, AttributeError):
            return default

    def _find(self, uuid):
        for entry in self._entries():
            if entry[1].uuid == uuid:
                return entry
        return None

    # -- interface ---------------------------------------------------------

    def list(self):
        return {info.uuid: info for _, info, active in self._entries()
                if active}

    def create(self, uuid, parent, mdev_type):
        info = mdev.mdev_info(uuid, parent, mdev_type)
        found = self._find(info.uuid)
        if found is not None:
            self._start_defined(info, *found)
            return
        persistent = self.persistent()      # before creating anything
        node = self._node_name(info.parent)
        gone = exception.MdevError(
            uuid=info.uuid, parent=info.parent, errno='ENODEV',
            reason='cannot create type %s: %s' % (
                info.mdev_type, self._unlisted(info.parent)))
        if node is None:
            raise gone
        xml = mdev_device_xml(info.uuid, node, info.mdev_type)
        try:
            dev = self._conn.nodeDeviceCreateXML(xml, 0)
        except self._errors as exc:
            if self._gone(info.parent):
                raise gone from exc
            raise self._fail(info.uuid, info.parent,
                             'nodeDeviceCreateXML of type %s under %s'
                             % (info.mdev_type, node), exc)
        if not persistent:
            return
        try:
            defined = self._conn.nodeDeviceDefineXML(xml, 0)
        except self._errors as exc:
            error = self._fail(info.uuid, info.parent,
                               'nodeDeviceDefineXML of type %s under %s'
                               % (info.mdev_type, node), exc)
            try:
                dev.destroy()
            except self._errors as exc2:
                error = exception.MdevError(
                    uuid=info.uuid, parent=info.parent, errno=None,
                    left_behind=[info.uuid],
                    reason='%s; destroying the transient mdev failed too: %s'
                           % (error.kwargs['reason'],
                              self._libvirt.reason(exc2)))
            raise error
        try:
            defined.setAutostart(1)
        except self._errors as exc:
            # The mdev exists and is defined; only its start at boot is
            # missing, which MdevManager.recreate_vanished() covers.
            LOG.warning('mdev %s on %s: %s', info.uuid, info.parent,
                        self._libvirt.reason(exc, 'setAutostart'))

    def _start_defined(self, info, dev, have, active):
        if active or have != info:
            raise exception.MdevError(
                uuid=info.uuid, parent=info.parent, errno='EEXIST',
                reason='node device %s already %s with parent %s and type %s'
                       % (dev.name(), 'exists' if active else 'is defined',
                          have.parent, have.mdev_type))
        try:
            dev.create(0)
        except self._errors as exc:
            raise self._fail(info.uuid, info.parent,
                             'starting defined node device %s' % dev.name(),
                             exc)

    def remove(self, uuid):
        uuid = names.normalize_uuid(uuid)
        found = self._find(uuid)
        if found is None:
            raise exception.MdevNotFound(
                uuid=uuid, parent='unknown', errno='ENOENT',
                reason='no mdev node device with this UUID')
        dev, info, active = found
        persistent = self._state(dev, 'isPersistent', False)
        try:
            if active:
                dev.destroy()
            if persistent:
                dev.undefine()
        except self._errors as exc:
            raise self._fail(uuid, info.parent,
                             'removing node device %s' % dev.name(), exc)

    def available(self, parent, mdev_type):
        parent = names.normalize_address(parent)
        mdev_type = names.validate_mdev_type(mdev_type)
        node = self._node_name(parent)
        if node is None:
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent, errno='ENODEV',
                reason=self._unlisted(parent))
        try:
            found = nodedev.parse_node_device(
                self._conn.nodeDeviceLookupByName(node).XMLDesc(0), node)
        except self._errors as exc:
            if self._gone(parent):
                raise exception.MdevTypeError(
                    mdev_type=mdev_type, parent=parent, errno='ENODEV',
                    reason=self._unlisted(parent)) from exc
            raise exception.MdevTypeError(
                mdev_type=mdev_type, parent=parent, errno=None,
                reason=self._libvirt.reason(exc, 'node device %s' % node))
        for type_ in getattr(found, 'mdev_types', ()):
            if type_.id == mdev_type:
                return type_.available_instances
        raise exception.MdevTypeError(
            mdev_type=mdev_type, parent=parent, errno='ENOENT',
            reason='node device %s does not expose this type' % node)
