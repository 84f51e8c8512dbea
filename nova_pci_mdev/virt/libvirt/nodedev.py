"""Node-device XML of libvirt, parsed into plain dataclasses.

Pure: no libvirt import, no I/O. :func:`parse_node_device` turns the XML of
one node device (``virNodeDeviceGetXMLDesc``) into one of

- :class:`PciFunction`: a device with a top-level ``pci`` capability; a
  ``virt_functions`` capability makes it an SR-IOV PF, a ``phys_function``
  capability with an address a VF, an ``mdev_types`` capability an mdev
  parent (the three are independent);
- :class:`VirtualParent`: a device whose top-level capability is
  ``mdev_types`` (``mtty``); newer libvirt formats it doubly nested,
  ``<capability type='mdev_types'><capability type='mdev_types'><type>``,
  and the single level form is accepted too;
- :class:`Mdev`: a mediated device (``capability type='mdev'``), named
  ``mdev_<uuid with _>`` or, since libvirt 7.7, ``mdev_<uuid>_<parent>``;
  the UUID comes from ``<uuid>`` when present (libvirt >= 7.3) else from
  the name;
- :class:`OtherMdevParent`: an mdev parent of another kind (s390
  ``ap_matrix``, ``css``): parsed to be named in a warning, never used;

or None for every other kind of device (system, net, usb, scsi...).

Invariants: addresses are canonical (``names.normalize_address``), vendor
and product ids are 4 lower-case hex digits without ``0x``, mdev type ids
pass ``names.validate_mdev_type``, UUIDs are lower case, integers are
ASCII digits, at most :data:`MAX_COUNT` (a larger ``availableInstances``
is capped, the XML's value kept; a larger NUMA node is refused). Any XML that
breaks them, is malformed or declares a DOCTYPE/ENTITY (:mod:`.xmlsafe`:
entity expansion is never performed) raises
:class:`~nova_pci_mdev.exception.NodeDeviceXMLInvalid` naming the device.
Node names are read and written by :mod:`.nodenames`.
"""

import dataclasses
import re

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import xmlsafe

_HEX_ID_RE = re.compile(r'^(0x)?([0-9a-fA-F]{1,4})$')
#: Largest value of each PCI address part (domain 16, bus 8, slot 5 and
#: function 3 bits).
_PCI_LIMITS = (('domain', 0xffff), ('bus', 0xff), ('slot', 0x1f),
               ('function', 0x7))
#: Fast paths for the two address spellings libvirt writes; any other
#: spelling is parsed part by part with range checks and precise errors.
_LIBVIRT_ADDRESS_ATTRS_RE = re.compile(
    r'0x([0-9a-fA-F]{4}:)0x([0-9a-fA-F]{2}:)0x([01][0-9a-fA-F]\.)0x([0-7])')
_DECIMAL_ADDRESS_RE = re.compile(
    r'([0-9]{1,5}):([0-9]{1,3}):([0-9]{1,2})\.([0-7])')
#: Integers in ASCII digits (``int`` also reads other scripts' and ``_``).
_INTEGER_RES = {base: re.compile(r'-?%s+|0[xX][0-9a-fA-F]+' % digits)
                for base, digits in ((10, '[0-9]'), (16, '[0-9a-fA-F]'))}
#: The largest count or NUMA node kept: what Nova's integer fields and
#: columns and Placement's inventory totals hold (signed 32 bits).
MAX_COUNT = 2 ** 31 - 1


# -- dataclasses -----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MdevType:
    """One ``<type>`` of an ``mdev_types`` capability.

    ``name`` is None when the vendor driver gives none (Intel GVT-g);
    ``device_api`` is None when absent (the schema requires it, we do not
    need it). ``reported_instances``: the XML's value when it was more
    than :data:`MAX_COUNT`, the ``available_instances`` kept.
    """

    id: str
    name: str | None
    device_api: str | None
    available_instances: int
    reported_instances: int | None = None


@dataclasses.dataclass(frozen=True)
class PciFunction:
    """A PCI function; ``is_pf``/``is_vf``/``is_mdev_parent`` are derived."""

    name: str                      # libvirt node name, pci_0000_84_00_0
    address: str                   # 0000:84:00.0
    vendor_id: str                 # 10de
    product_id: str                # 1eb8
    numa_node: int | None = None
    parent: str | None = None      # libvirt node name of the parent
    phys_function: str | None = None   # PF address, for a VF
    virt_functions: tuple = ()     # VF addresses, for a PF
    sriov_capable: bool = False    # has a virt_functions capability
    mdev_types: tuple = ()         # MdevType, in XML order
    vendor_name: str | None = None
    product_name: str | None = None

    @property
    def is_pf(self):
        return self.sriov_capable

    @property
    def is_vf(self):
        return self.phys_function is not None

    @property
    def is_mdev_parent(self):
        return bool(self.mdev_types)


@dataclasses.dataclass(frozen=True)
class VirtualParent:
    """An mdev parent that is not a PCI function (``mtty``).

    ``address`` is the sysfs name of the parent: the last component of
    ``<path>`` when given (``/sys/devices/virtual/mtty/mtty`` -> ``mtty``),
    else the node name.
    """

    name: str
    address: str
    parent: str | None = None
    mdev_types: tuple = ()


@dataclasses.dataclass(frozen=True)
class OtherMdevParent:
    """An mdev parent of another ``kind`` (its capability); ``address`` as
    for :class:`VirtualParent`, None when that is no valid name."""

    name: str
    kind: str
    address: str | None
    mdev_types: tuple = ()


@dataclasses.dataclass(frozen=True)
class Mdev:
    """A mediated device.

    ``parent`` is the parent's libvirt node name; ``parent_addr`` is the
    ``<parent_addr>`` element of newer libvirt (the parent's sysfs
    address) when present. ``active`` is not in the XML: the parser sets
    True and the caller replaces it with ``virNodeDeviceIsActive`` when the
    connection answers (a defined but stopped mdev is inactive).
    """

    name: str
    uuid: str
    mdev_type: str
    parent: str | None = None
    parent_addr: str | None = None
    iommu_group: int | None = None
    active: bool = True


# -- parsing ---------------------------------------------------------------

class _Context:
    """Builds errors that name the device being parsed."""

    def __init__(self, device):
        self.device = device

    def error(self, reason):
        return exception.NodeDeviceXMLInvalid(device=self.device,
                                              reason=reason)

    def text(self, elem, tag, required=True):
        child = elem.find(tag)
        if child is None or child.text is None or not child.text.strip():
            if required:
                raise self.error('missing <%s> in <%s>' % (tag, elem.tag))
            return None
        return child.text.strip()

    def integer(self, value, what, minimum=0, maximum=None, base=10):
        """Parse ``value``; decimal (or hex digits with ``base=16``), or
        hex with an ``0x`` prefix; ASCII digits only."""
        text = (value or '').strip()
        hexa = text[:2] in ('0x', '0X')
        try:
            if not _INTEGER_RES[base].fullmatch(text):
                raise ValueError(text)
            number = int(text[2:] if hexa else text, 16 if hexa else base)
        except ValueError:
            raise self.error('%s %r is not an integer' % (what, value))
        if number < minimum or (maximum is not None and number > maximum):
            raise self.error('%s %r is out of range %d..%s' % (
                what, value, minimum,
                'inf' if maximum is None else maximum))
        return number

    def hex_id(self, elem, tag):
        child = elem.find(tag)
        value = None if child is None else child.get('id')
        match = _HEX_ID_RE.match(value or '')
        if not match:
            raise self.error('<%s id=%r> is not a hex id of at most 4 '
                             'digits' % (tag, value))
        name = (child.text or '').strip() or None
        return match.group(2).lower().zfill(4), name

    def pci_address(self, parts):
        """Canonical address of checked ``(domain, bus, slot, function)``."""
        return '%04x:%02x:%02x.%x' % parts

    def address_parts(self, values, what, base):
        """Range-checked integers of ``values`` (domain, bus, slot,
        function); ``what`` prefixes the part names in errors."""
        return tuple(
            self.integer(value, what + key, maximum=limit, base=base)
            for value, (key, limit) in zip(values, _PCI_LIMITS))

    def address_attrs(self, elem):
        """An ``<address domain='0x0000' bus='0x81' .../>`` (hex)."""
        values = [elem.get(key) for key, _ in _PCI_LIMITS]
        # libvirt's own spelling (0x%04x, 0x%02x, 0x%02x, 0x%x) is already
        # canonical once lower-cased; anything else takes the general path.
        match = _LIBVIRT_ADDRESS_ATTRS_RE.fullmatch(
            '%s:%s:%s.%s' % tuple(values))
        if match:
            return ''.join(match.groups()).lower()
        return self.pci_address(
            self.address_parts(values, 'address ', base=16))

    def address_children(self, cap):
        """The decimal ``<domain>``, ``<bus>``, ``<slot>``, ``<function>``
        children of a ``pci`` capability."""
        values = [cap.findtext(key) for key, _ in _PCI_LIMITS]
        match = _DECIMAL_ADDRESS_RE.fullmatch('%s:%s:%s.%s' % tuple(values))
        if match:
            parts = tuple(map(int, match.groups()))
            if all(part <= limit
                   for part, (_, limit) in zip(parts, _PCI_LIMITS)):
                return self.pci_address(parts)
        for (key, _), value in zip(_PCI_LIMITS, values):
            if value is None or not value.strip():
                raise self.error('missing <%s> in <%s>' % (key, cap.tag))
        return self.pci_address(self.address_parts(values, '', base=10))

    def mdev_type_id(self, value):
        try:
            return names.validate_mdev_type(value)
        except exception.Invalid as exc:
            raise self.error(str(exc))


def _mdev_types(ctx, cap):
    """Types of an ``mdev_types`` capability, flattening one nesting."""
    types = []
    seen = set()
    elems = list(cap.findall('type'))
    for nested in cap.findall('capability'):
        if nested.get('type') == 'mdev_types':
            elems.extend(nested.findall('type'))
    for elem in elems:
        type_id = ctx.mdev_type_id(elem.get('id'))
        if type_id in seen:
            raise ctx.error('mdev type %r listed twice' % type_id)
        seen.add(type_id)
        available = ctx.integer(ctx.text(elem, 'availableInstances'),
                                'availableInstances of %s' % type_id)
        types.append(MdevType(
            type_id, ctx.text(elem, 'name', required=False),
            ctx.text(elem, 'deviceAPI', required=False),
            min(available, MAX_COUNT),
            available if available > MAX_COUNT else None))
    if not types:
        raise ctx.error('mdev_types capability lists no <type>')
    return tuple(types)


def _parse_pci(ctx, root, cap):
    address = ctx.address_children(cap)
    vendor_id, vendor_name = ctx.hex_id(cap, 'vendor')
    product_id, product_name = ctx.hex_id(cap, 'product')
    numa_node = None
    numa = cap.find('numa')
    if numa is not None and numa.get('node') not in (None, '-1'):
        numa_node = ctx.integer(numa.get('node'), 'numa node',
                                maximum=MAX_COUNT)
    phys_function = None
    virt_functions = []
    sriov_capable = False
    mdev_types = ()
    for sub in cap.findall('capability'):
        kind = sub.get('type')
        if kind == 'phys_function':
            addrs = sub.findall('address')
            if len(addrs) > 1:
                raise ctx.error('phys_function lists %d addresses'
                                % len(addrs))
            if addrs:
                phys_function = ctx.address_attrs(addrs[0])
        elif kind == 'virt_functions':
            sriov_capable = True
            virt_functions.extend(ctx.address_attrs(a)
                                  for a in sub.findall('address'))
        elif kind == 'mdev_types':
            mdev_types = _mdev_types(ctx, sub)
    return PciFunction(
        name=ctx.device, address=address, vendor_id=vendor_id,
        product_id=product_id, numa_node=numa_node,
        parent=_text_or_none(root, 'parent'), phys_function=phys_function,
        virt_functions=tuple(virt_functions), sriov_capable=sriov_capable,
        mdev_types=mdev_types, vendor_name=vendor_name,
        product_name=product_name)


def _sysfs_name(ctx, root):
    path = _text_or_none(root, 'path')
    return names.normalize_address(
        path.rstrip('/').rsplit('/', 1)[-1] if path else ctx.device)


def _parse_virtual_parent(ctx, root, cap):
    try:
        address = _sysfs_name(ctx, root)
    except exception.Invalid as exc:
        raise ctx.error('virtual parent name: %s' % exc)
    return VirtualParent(name=ctx.device, address=address,
                         parent=_text_or_none(root, 'parent'),
                         mdev_types=_mdev_types(ctx, cap))


def _parse_other_parent(ctx, root, cap, types):
    try:
        address = _sysfs_name(ctx, root)
    except exception.Invalid:
        address = None
    return OtherMdevParent(ctx.device, cap.get('type'), address,
                           _mdev_types(ctx, types))


def _parse_mdev(ctx, root, cap):
    type_elem = cap.find('type')
    mdev_type = ctx.mdev_type_id(
        None if type_elem is None else type_elem.get('id'))
    from_name = nodenames.mdev_uuid_from_name(ctx.device)
    from_elem = ctx.text(cap, 'uuid', required=False)
    if from_elem is not None:
        try:
            uuid = names.normalize_uuid(from_elem)
        except exception.Invalid as exc:
            raise ctx.error(str(exc))
        if from_name is not None and from_name != uuid:
            raise ctx.error('<uuid> %s does not match the node name'
                            % uuid)
    elif from_name is not None:
        uuid = from_name
    else:
        raise ctx.error('no <uuid> and the node name is not '
                        'mdev_<uuid>[_<parent>]')
    group = cap.find('iommuGroup')
    iommu_group = None
    if group is not None:
        iommu_group = ctx.integer(group.get('number'), 'iommuGroup number')
    return Mdev(name=ctx.device, uuid=uuid, mdev_type=mdev_type,
                parent=_text_or_none(root, 'parent'),
                parent_addr=_text_or_none(cap, 'parent_addr'),
                iommu_group=iommu_group)


def _text_or_none(elem, tag):
    child = elem.find(tag)
    if child is None or child.text is None:
        return None
    return child.text.strip() or None


_PARSERS = {'pci': _parse_pci, 'mdev_types': _parse_virtual_parent,
            'mdev': _parse_mdev}


def parse_node_device(xml, device_name=None):
    """Parse one node device's XML; see the module docstring.

    ``device_name`` is the name libvirt listed the device under; it names
    the device in errors and stands in for a missing ``<name>``.
    """
    label = device_name or '<unnamed node device>'
    root = xmlsafe.parse_xml(xml, _Context(label).error)
    if root.tag != 'device':
        raise _Context(label).error('root element is <%s>, expected '
                                    '<device>' % root.tag)
    name = _text_or_none(root, 'name') or device_name
    if not name:
        raise _Context(label).error('missing <name>')
    ctx = _Context(name)
    caps = root.findall('capability')
    for cap in caps:
        parser = _PARSERS.get(cap.get('type'))
        if parser is not None:
            return parser(ctx, root, cap)
    for cap in caps:
        types = cap.find("capability[@type='mdev_types']")
        if types is not None:
            return _parse_other_parent(ctx, root, cap, types)
    return None
