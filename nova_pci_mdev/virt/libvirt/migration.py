"""The guest XML a live migration hands to the destination.

Pure: :func:`destination_xml` takes the source domain's XML (what libvirt's
``XMLDesc`` gives for a migration) and ``{source device: destination
device}`` (mdev UUIDs and PCI addresses, from the destination's claim) and
returns the same document with each ``<hostdev>``'s host device replaced:
the ``uuid`` of an mdev hostdev's ``<source><address>``, the
``domain``/``bus``/``slot``/``function`` of a PCI hostdev's. The new
attribute values come from the config classes of :mod:`.config`
(``source_address()``), so they are spelled as the guest XML the product
writes at boot.

Invariants:

* nothing else changes: every other element, attribute, text and comment
  inside the domain (the guest-side ``<address>`` of a hostdev, its
  ``<alias>``, disks, interfaces, unknown elements, namespaced ones) is
  written back as it was read;
* every mdev and PCI ``<hostdev>`` of the domain has a destination in the
  mapping, every entry of the mapping is used exactly once, and no device
  appears twice: a guest is never started on the destination with a device
  of the source, nor two hostdevs on one device. Otherwise
  :class:`~nova_pci_mdev.exception.LiveMigrationRefused` names the device.
"""

import collections
import dataclasses
from xml.etree import ElementTree

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt import xmlsafe

_HOSTDEVS = {'mdev': (vconfig.LibvirtConfigGuestHostdevMDEV, 'uuid'),
             'pci': (vconfig.LibvirtConfigGuestHostdevPCI, 'address')}


def _refuse(reason):
    return exception.LiveMigrationRefused(what='the guest XML',
                                          reason=reason)


def _key(value):
    """Mapping keys and hostdev sources compare in canonical form."""
    return names.normalize_address(value)


def parse_domain(text):
    """The domain element of ``text``, comments kept; a parse error is a
    LibvirtXmlError naming ``<domain>``."""
    root = xmlsafe.parse_xml(
        text, lambda reason: exception.LibvirtXmlError(element='domain',
                                                       reason=reason),
        keep_comments=True, max_depth=xmlsafe.GUEST_MAX_DEPTH)
    if root.tag != 'domain':
        raise exception.LibvirtXmlError(
            element='domain', reason='got <%s> instead' % root.tag)
    return root


def hostdev_sources(root):
    """``[(element, config object, canonical source)]`` of the domain's
    mdev and PCI hostdevs, in document order."""
    out = []
    devices = root.find('devices')
    for el in [] if devices is None else devices.findall('hostdev'):
        kind = _HOSTDEVS.get(el.get('type'))
        if kind is None:
            continue
        cls, field = kind
        cfg = cls.parse_dom(el)
        out.append((el, cfg, _key(getattr(cfg, field))))
    return out


def destination_xml(source_xml, mapping):
    """``source_xml`` with every hostdev moved to its destination device.

    :param mapping: ``{source uuid or PCI address: destination one}``.
    :raises LiveMigrationRefused: a hostdev without a destination, a
        mapping entry no hostdev uses, a device used twice, or an mdev
        mapped to a PCI function (or back).
    """
    wanted = {_key(src): _key(dst) for src, dst in mapping.items()}
    twice = sorted(dst for dst, n in collections.Counter(
        wanted.values()).items() if n > 1)
    if twice:
        raise _refuse('destination device(s) %s given to more than one '
                      'hostdev' % ', '.join(twice))
    root = parse_domain(source_xml)
    seen = set()
    for el, cfg, source in hostdev_sources(root):
        if source in seen:
            raise _refuse('hostdev %s appears twice in the domain' % source)
        seen.add(source)
        if source not in wanted:
            raise _refuse('hostdev %s of the source domain has no '
                          'destination device' % source)
        field = _HOSTDEVS[el.get('type')][1]
        valid, what = ((names.is_pci_address, 'a PCI address')
                       if field == 'address' else (names.is_uuid,
                                                   'an mdev UUID'))
        if not valid(wanted[source]):
            raise _refuse('hostdev %s (type %s) cannot move to %s: not %s'
                          % (source, el.get('type'), wanted[source], what))
        target = dataclasses.replace(cfg, **{field: wanted[source]})
        address = el.find('source/address')
        for attr, value in target.source_address().items():
            address.set(attr, value)
    unused = sorted(set(wanted) - seen)
    if unused:
        raise _refuse('no hostdev of the source domain uses %s'
                      % ', '.join(unused))
    return ElementTree.tostring(root, encoding='unicode')
