"""Libvirt XML elements as small config objects: parse and format only.

One class per XML element: ``format_dom()`` builds an ``Element``,
``to_xml()`` the text; the classmethods ``parse_dom(element)`` and
``parse_str(text)`` read them back. There is no policy here: values are
written as given (a malformed mdev UUID is formatted as is, and libvirt
refuses it), and only a value that must be split to be written (a PCI
address) is checked.

Invariants: ``cls.parse_str(obj.to_xml()) == obj`` for every object built
with canonical values (lower-case hex, ``dddd:bb:ss.f`` addresses); parsing
never expands entities and refuses DTDs; every parse error is a
:class:`~nova_pci_mdev.exception.LibvirtXmlError` naming the element and
the missing or bad part.
"""

import copy
import dataclasses
import typing
from xml.etree import ElementTree

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt import xmlsafe

_ON_OFF = {'on': True, 'off': False}
#: ``<memory unit=...>`` multipliers to KiB (libvirt's binary units).
_MEMORY_UNITS = {'KiB': 1, 'k': 1, 'K': 1, 'MiB': 1024, 'M': 1024,
                 'GiB': 1024 ** 2, 'G': 1024 ** 2, 'TiB': 1024 ** 3,
                 'T': 1024 ** 3}
_PCI_PARTS = (('domain', 0xffff, '0x%04x'), ('bus', 0xff, '0x%02x'),
              ('slot', 0x1f, '0x%02x'), ('function', 0x7, '0x%x'))


def _error(element, reason):
    return exception.LibvirtXmlError(element=element, reason=reason)


def _sub(parent, tag, text=None, **attrs):
    child = ElementTree.SubElement(parent, tag, attrs)
    if text is not None:
        child.text = str(text)
    return child


def _on_off(value):
    return None if value is None else ('on' if value else 'off')


def _parse_on_off(el, attr):
    value = el.get(attr)
    if value is None:
        return None
    if value not in _ON_OFF:
        raise _error(el.tag, "%s=%r: expected 'on' or 'off'" % (attr, value))
    return _ON_OFF[value]


def _parse_int(el, what, text):
    try:
        return int(text.strip(), 0)
    except (AttributeError, ValueError):
        raise _error(el.tag, '%s %r: expected an integer' % (what, text))


class LibvirtConfigObject:
    """Base: text <-> element plumbing; subclasses are dataclasses."""

    ROOT: typing.ClassVar[str] = ''

    def format_dom(self):
        raise NotImplementedError

    @classmethod
    def parse_dom(cls, el):
        raise NotImplementedError

    def to_xml(self, pretty=True):
        el = self.format_dom()
        if pretty:
            ElementTree.indent(el)
        return ElementTree.tostring(el, encoding='unicode')

    @classmethod
    def parse_str(cls, text):
        el = xmlsafe.parse_xml(text, lambda reason: _error(cls.ROOT, reason),
                               max_depth=xmlsafe.GUEST_MAX_DEPTH)
        return cls.parse_dom(el)

    @classmethod
    def _check_root(cls, el, **attrs):
        if el.tag != cls.ROOT:
            raise _error(cls.ROOT, 'got <%s> instead' % el.tag)
        for attr, want in attrs.items():
            if el.get(attr) != want:
                raise _error(cls.ROOT, '%s=%r, expected %r'
                             % (attr, el.get(attr), want))


@dataclasses.dataclass
class LibvirtConfigGuestHostdevMDEV(LibvirtConfigObject):
    """``<hostdev mode='subsystem' type='mdev' model='vfio-pci'>`` with
    ``<source><address uuid=.../></source>``; ``display``/``ramfb`` are
    written as ``on``/``off`` when not None."""

    ROOT: typing.ClassVar[str] = 'hostdev'

    uuid: str
    model: str | None = 'vfio-pci'
    display: bool | None = None
    ramfb: bool | None = None

    def format_dom(self):
        el = ElementTree.Element('hostdev', mode='subsystem', type='mdev')
        if self.model is not None:
            el.set('model', self.model)
        for attr in ('display', 'ramfb'):
            if getattr(self, attr) is not None:
                el.set(attr, _on_off(getattr(self, attr)))
        _sub(_sub(el, 'source'), 'address', **self.source_address())
        return el

    def source_address(self):
        """The attributes of ``<source><address>``: the host device."""
        return {'uuid': self.uuid}

    @classmethod
    def parse_dom(cls, el):
        cls._check_root(el, mode='subsystem', type='mdev')
        address = el.find('source/address')
        if address is None or address.get('uuid') is None:
            raise _error('hostdev', "type='mdev' needs <source><address "
                         "uuid=.../></source>")
        return cls(uuid=address.get('uuid'), model=el.get('model'),
                   display=_parse_on_off(el, 'display'),
                   ramfb=_parse_on_off(el, 'ramfb'))


@dataclasses.dataclass
class LibvirtConfigGuestHostdevPCI(LibvirtConfigObject):
    """``<hostdev mode='subsystem' type='pci' managed='yes'>`` with the
    function's ``<source><address domain= bus= slot= function=/>``;
    ``address`` is ``dddd:bb:ss.f``."""

    ROOT: typing.ClassVar[str] = 'hostdev'

    address: str
    managed: bool = True

    def format_dom(self):
        attrs = self.source_address()
        el = ElementTree.Element('hostdev', mode='subsystem', type='pci',
                                 managed='yes' if self.managed else 'no')
        _sub(_sub(el, 'source'), 'address', **attrs)
        return el

    def source_address(self):
        """The attributes of ``<source><address>``: the host function."""
        match = names.PCI_ADDRESS_RE.match(self.address or '')
        if not match:
            raise exception.InvalidPciAddress(
                value=self.address, rule='a PCI hostdev needs dddd:bb:ss.f')
        return {part: fmt % int(match.group(part), 16)
                for part, _limit, fmt in _PCI_PARTS}

    @classmethod
    def parse_dom(cls, el):
        cls._check_root(el, mode='subsystem', type='pci')
        address = el.find('source/address')
        if address is None:
            raise _error('hostdev', "type='pci' needs <source><address/>")
        values = []
        for part, limit, _fmt in _PCI_PARTS:
            value = _parse_int(address, part, address.get(part))
            if not 0 <= value <= limit:
                raise _error('address', '%s=%r: out of range 0..%#x'
                             % (part, address.get(part), limit))
            values.append(value)
        return cls(address='%04x:%02x:%02x.%x' % tuple(values),
                   managed=el.get('managed', 'no') == 'yes')


def _compact(el):
    """``el`` as compact text: whitespace-only text and tails dropped.

    ``el``'s own tail (text after it inside its parent) is not part of
    the element and is dropped before re-serialising it.
    """
    shallow = copy.copy(el)
    shallow.tail = None
    try:
        clone = ElementTree.fromstring(ElementTree.tostring(shallow))
    except ElementTree.ParseError as exc:
        raise _error(el.tag, 'cannot re-serialise: %s' % exc) from None
    for node in clone.iter():
        if node.text is not None and not node.text.strip():
            node.text = None
        if node.tail is not None and not node.tail.strip():
            node.tail = None
    return ElementTree.tostring(clone, encoding='unicode')


@dataclasses.dataclass
class LibvirtConfigGuestRawDevice(LibvirtConfigObject):
    """Any other ``<devices>`` child, kept verbatim; ``xml`` is stored
    compact (re-serialised) so that equal elements compare equal."""

    xml: str

    def __post_init__(self):
        self.xml = _compact(xmlsafe.parse_xml(
            self.xml, lambda reason: _error('devices', reason),
            max_depth=xmlsafe.GUEST_MAX_DEPTH))

    def format_dom(self):
        return ElementTree.fromstring(self.xml)

    @classmethod
    def parse_dom(cls, el):
        return cls(xml=_compact(el))


def _parse_device(el):
    if el.tag == 'hostdev' and el.get('type') == 'mdev':
        return LibvirtConfigGuestHostdevMDEV.parse_dom(el)
    if el.tag == 'hostdev' and el.get('type') == 'pci':
        return LibvirtConfigGuestHostdevPCI.parse_dom(el)
    return LibvirtConfigGuestRawDevice.parse_dom(el)


@dataclasses.dataclass
class LibvirtConfigGuest(LibvirtConfigObject):
    """A minimal ``<domain>``: name, uuid, memory (KiB), vcpus, os type and
    the ``<devices>`` list (hostdev objects and raw devices)."""

    ROOT: typing.ClassVar[str] = 'domain'

    name: str
    uuid: str | None = None
    memory_kb: int = 524288
    vcpus: int = 1
    virt_type: str = 'kvm'
    os_type: str = 'hvm'
    devices: list = dataclasses.field(default_factory=list)

    @property
    def hostdevs(self):
        return [d for d in self.devices if isinstance(
            d, (LibvirtConfigGuestHostdevMDEV, LibvirtConfigGuestHostdevPCI))]

    def format_dom(self):
        el = ElementTree.Element('domain', type=self.virt_type)
        _sub(el, 'name', self.name)
        if self.uuid is not None:
            _sub(el, 'uuid', self.uuid)
        _sub(el, 'memory', self.memory_kb, unit='KiB')
        _sub(el, 'vcpu', self.vcpus)
        _sub(_sub(el, 'os'), 'type', self.os_type)
        devices = _sub(el, 'devices')
        for device in self.devices:
            devices.append(device.format_dom())
        return el

    @classmethod
    def parse_dom(cls, el):
        cls._check_root(el)
        name = el.findtext('name')
        if not name:
            raise _error('domain', 'missing <name>')
        memory = el.find('memory')
        memory_kb = cls.memory_kb
        if memory is not None:
            unit = memory.get('unit', 'KiB')
            if unit not in _MEMORY_UNITS:
                raise _error('memory', 'unit %r: expected one of %s'
                             % (unit, ', '.join(_MEMORY_UNITS)))
            memory_kb = _parse_int(memory, 'memory',
                                   memory.text) * _MEMORY_UNITS[unit]
        vcpu = el.find('vcpu')
        devices = el.find('devices')
        return cls(
            name=name, uuid=el.findtext('uuid'), memory_kb=memory_kb,
            vcpus=cls.vcpus if vcpu is None else _parse_int(
                vcpu, 'vcpu', vcpu.text),
            virt_type=el.get('type'),
            os_type=el.findtext('os/type', cls.os_type),
            devices=[] if devices is None else [
                _parse_device(child) for child in devices])


def devices_xml(devices, pretty=True):
    """The ``<devices>`` element holding ``devices`` (config objects)."""
    el = ElementTree.Element('devices')
    for device in devices:
        el.append(device.format_dom())
    if pretty:
        ElementTree.indent(el)
    return ElementTree.tostring(el, encoding='unicode')


@dataclasses.dataclass
class LibvirtConfigNodeDeviceMdev(LibvirtConfigObject):
    """An mdev node device for ``nodeDeviceCreateXML``/``DefineXML``::

        <device><parent>pci_0000_84_00_0</parent>
          <capability type='mdev'><type id='nvidia-35'/><uuid>...</uuid>
          </capability></device>

    ``name``, ``uuid``, ``iommu_group`` and ``attrs`` ((name, value)
    pairs of ``<attr>``) are optional; libvirt fills name and uuid.
    """

    ROOT: typing.ClassVar[str] = 'device'

    parent: str
    mdev_type: str
    uuid: str | None = None
    name: str | None = None
    iommu_group: int | None = None
    attrs: tuple = ()

    def format_dom(self):
        el = ElementTree.Element('device')
        if self.name is not None:
            _sub(el, 'name', self.name)
        _sub(el, 'parent', self.parent)
        cap = _sub(el, 'capability', type='mdev')
        _sub(cap, 'type', id=self.mdev_type)
        if self.uuid is not None:
            _sub(cap, 'uuid', self.uuid)
        if self.iommu_group is not None:
            _sub(cap, 'iommuGroup', number=str(self.iommu_group))
        for attr_name, value in self.attrs:
            _sub(cap, 'attr', name=attr_name, value=value)
        return el

    @classmethod
    def parse_dom(cls, el):
        cls._check_root(el)
        cap = el.find("capability[@type='mdev']")
        if cap is None:
            raise _error('device', "missing <capability type='mdev'>")
        type_el = cap.find('type')
        parent = (el.findtext('parent') or '').strip()
        if type_el is None or not type_el.get('id'):
            raise _error('device', "missing <type id=.../> in the mdev "
                         "capability")
        if not parent:
            raise _error('device', 'missing <parent>')
        group = cap.find('iommuGroup')
        uuid = cap.findtext('uuid')
        return cls(
            parent=parent, mdev_type=type_el.get('id'),
            uuid=uuid.strip() if uuid else None, name=el.findtext('name'),
            iommu_group=None if group is None else _parse_int(
                group, 'iommuGroup number', group.get('number')),
            attrs=tuple((a.get('name'), a.get('value'))
                        for a in cap.findall('attr')))
