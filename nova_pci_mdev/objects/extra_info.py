"""Keys and flags of ``PciDevice.extra_info``, named once.

``extra_info`` is a dict of strings (Nova stores it as JSON text), so flags
are the strings :data:`TRUE` / :data:`FALSE`; :func:`flag` writes one and
:func:`is_true` / :func:`is_false` read one (an absent key is neither).

Who writes what: device records from discovery
(:mod:`nova_pci_mdev.virt.libvirt.records`) set every key but
:data:`MISSING` and :data:`LISTED_UNDER`, which the tracker owns
(:mod:`nova_pci_mdev.pci.manager`).
"""

TRUE = 'true'
FALSE = 'false'

#: slot: an mdev with this UUID is running on the host.
MDEV_EXISTS = 'mdev_exists'
#: slot: its type is the one its parent exposes (FALSE: a leftover mdev of
#: another type, visible only while an instance holds it).
MDEV_EXPOSED = 'mdev_exposed'
#: parent: not a PCI function (``mtty``).
VIRTUAL = 'virtual'
#: parent: FALSE when it can never be handed to a guest whole (a virtual
#: parent; the PF of an NVIDIA GPU whose VFs are its vGPUs): no pool offers
#: it, only its slots or VFs.
WHOLE = 'whole'
#: parent: comma-separated mdev types it supports.
SUPPORTED_MDEV_TYPES = 'supported_mdev_types'
#: parent: the Placement resource class of the type it exposes.
RESOURCE_CLASS = 'resource_class'
#: parent: how many more mdevs of its exposed type it can create (a
#: decimal string, absent at 0; see nova_pci_mdev.pci.capacity).
CREATABLE = 'creatable'
#: parent that is an SR-IOV VF: the address of its PF.
PHYS_FUNCTION = 'phys_function'
#: any device in use that left the host or the whitelist (tracker only).
MISSING = 'missing'
#: slot in use whose mdev the host lists under another parent or with
#: another type than the claim holds it on (after a reboot): ``'<parent
#: address> <mdev type>'`` as listed (tracker only; the slot is MISSING
#: too, and stays where its claim put it).
LISTED_UNDER = 'listed_under'


def flag(value):
    """:data:`TRUE` or :data:`FALSE` for a truth value."""
    return TRUE if value else FALSE


def is_true(extra, key):
    """True when ``extra`` (a dict or None) has ``key`` set to TRUE."""
    return bool(extra) and extra.get(key) == TRUE


def is_false(extra, key):
    """True when ``extra`` (a dict or None) has ``key`` set to FALSE."""
    return bool(extra) and extra.get(key) == FALSE
