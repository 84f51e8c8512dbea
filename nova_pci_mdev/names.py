"""Validation of the names that identify devices.

Device addresses, mdev UUIDs, virtual parent names and mdev type names come
from operators (configuration), from the hypervisor (node-device XML) and
from persisted state, and several of them end up as components of sysfs
paths. Invariant: every function here either returns a normalised value that
is a single, non-empty path component free of ``/``, NUL and ``..``, or
raises a :class:`~nova_pci_mdev.exception.Invalid` subclass naming the value
and the rule it breaks. This module does no I/O.
"""

import re

from nova_pci_mdev import exception

#: ``domain:bus:slot.function``; slot is 5 bits and function 3 bits.
PCI_ADDRESS_RE = re.compile(
    r'^(?P<domain>[0-9a-fA-F]{4}):(?P<bus>[0-9a-fA-F]{2}):'
    r'(?P<slot>[01][0-9a-fA-F])\.(?P<function>[0-7])$')
UUID_RE = re.compile(
    r'^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
    r'[0-9a-fA-F]{12}$')
#: Either of the two above, in one match (the tracker normalises the
#: address of every record of a sync).
_PCI_OR_UUID_RE = re.compile('(?:%s)|(?:%s)' % (PCI_ADDRESS_RE.pattern,
                                                UUID_RE.pattern))
#: Virtual mdev parents (``mtty``, ``mdpy``) are named like kernel devices:
#: a letter first, so that a mistyped PCI address or UUID is never taken
#: for a name.
PARENT_NAME_RE = re.compile(r'^[A-Za-z][A-Za-z0-9_-]*$')
UUID_PREFIX_RE = re.compile(r'^[0-9a-fA-F]{8}-')
#: mdev type names: ``nvidia-35``, ``i915-GVTg_V5_4``, ``mlx5_core-local``.
MDEV_TYPE_RE = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.:-]*$')

MAX_ADDRESS_LEN = 64
MAX_MDEV_TYPE_LEN = 128

ADDRESS_RULE = ('expected a PCI address dddd:bb:ss.f (hex), an mdev UUID '
                'or a virtual parent name (a letter, then letters, digits, '
                '"_" and "-"; at most %d characters)' % MAX_ADDRESS_LEN)
MDEV_TYPE_RULE = ('expected letters, digits, "_", "-", ":" and "." (not '
                  'leading, no "..", at most %d characters)'
                  % MAX_MDEV_TYPE_LEN)


def is_pci_address(value):
    return isinstance(value, str) and bool(PCI_ADDRESS_RE.fullmatch(value))


def is_uuid(value):
    return isinstance(value, str) and bool(UUID_RE.fullmatch(value))


def normalize_address(value):
    """Return ``value`` as a canonical device address or raise.

    PCI addresses and UUIDs are lower-cased; virtual parent names keep their
    case (sysfs names are case-sensitive).
    """
    if not isinstance(value, str):
        raise exception.InvalidPciAddress(value=value, rule=ADDRESS_RULE)
    if _PCI_OR_UUID_RE.fullmatch(value):
        return value.lower()
    if (len(value) <= MAX_ADDRESS_LEN and PARENT_NAME_RE.fullmatch(value)
            and not UUID_PREFIX_RE.match(value)):
        return value
    raise exception.InvalidPciAddress(value=value, rule=ADDRESS_RULE)


def normalize_uuid(value, what='mdev UUID'):
    if not is_uuid(value):
        raise exception.InvalidValue(
            field=what, value=value,
            rule='expected a UUID xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx')
    return value.lower()


def validate_mdev_type(value, what='mdev type'):
    """Return ``value`` if it is a safe mdev type name, else raise."""
    if (not isinstance(value, str) or len(value) > MAX_MDEV_TYPE_LEN
            or not MDEV_TYPE_RE.fullmatch(value) or '..' in value):
        raise exception.InvalidValue(field=what, value=value,
                                     rule=MDEV_TYPE_RULE)
    return value
