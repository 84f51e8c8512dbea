"""libvirt node-device names, and where an mdev's parent is: one place.

Pure. libvirt names a PCI function ``pci_<dddd>_<bb>_<ss>_<f>`` and an mdev
``mdev_<uuid with _>`` or, since libvirt 7.7, ``mdev_<uuid>_<parent>``; a
virtual parent (``mtty``) has a node name that need not be its address.

:func:`parent_address` is the only resolution of an mdev's parent from what
libvirt says about it (discovery, the emulated host and the libvirt mdev
backend all use it): the listing's own parents first, then libvirt's
``<parent_addr>``, then a ``pci_...`` parent name.
"""

import re

from nova_pci_mdev import exception
from nova_pci_mdev import names

_PCI_NAME_RE = re.compile(
    r'^pci_([0-9a-fA-F]{4})_([0-9a-fA-F]{2})_([0-9a-fA-F]{2})_([0-7])$')
_MDEV_NAME_RE = re.compile(
    r'^mdev_([0-9a-fA-F]{8}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_'
    r'[0-9a-fA-F]{12})(_.+)?$')


def pci_node_name(address):
    """``0000:84:00.0`` -> ``pci_0000_84_00_0``."""
    return 'pci_' + address.replace(':', '_').replace('.', '_')


def pci_address_from_name(name):
    """``pci_0000_84_00_0`` -> ``0000:84:00.0``; None if not such a name."""
    match = _PCI_NAME_RE.match(name or '')
    if not match:
        return None
    return '%s:%s:%s.%s' % tuple(g.lower() for g in match.groups())


def mdev_node_name(uuid, parent_node=None):
    """``mdev_<uuid with _>``, with ``_<parent_node>`` when given."""
    base = 'mdev_' + uuid.replace('-', '_')
    return '%s_%s' % (base, parent_node) if parent_node else base


def mdev_uuid_from_name(name):
    """The UUID in ``mdev_<uuid>`` or ``mdev_<uuid>_<parent>``, or None."""
    match = _MDEV_NAME_RE.match(name or '')
    if not match:
        return None
    return match.group(1).replace('_', '-').lower()


def parent_address(mdev, address_of):
    """The address of the parent of ``mdev`` (a parsed ``nodedev.Mdev``),
    or None when nothing says.

    ``address_of``: ``{node name: address}`` of the parents libvirt listed.
    """
    if mdev.parent in address_of:
        return address_of[mdev.parent]
    if mdev.parent_addr:
        try:
            return names.normalize_address(mdev.parent_addr)
        except exception.Invalid:
            return None
    return pci_address_from_name(mdev.parent)
