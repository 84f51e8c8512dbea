"""The one exception hierarchy of nova-pci-mdev.

Invariant: every error this library raises on purpose is a
:class:`NovaPciMdevException`. Each subclass carries a ``msg_fmt`` whose
placeholders name the object and the value at fault, so that the message
alone tells an operator what to fix. Subclasses of :class:`Invalid` mean
"bad input or configuration" (the CLI exits 2); subclasses of
:class:`RequestNotSatisfiable` mean "valid request, no room" (the CLI
exits 1); everything else, :class:`HostDescriptionInvalid` (what libvirt
or a test host's files describe) included, is a host or state failure
(the CLI exits 3).
"""


class NovaPciMdevException(Exception):
    """Base class: formats ``msg_fmt`` with the keyword arguments."""

    msg_fmt = 'An unknown error occurred.'

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError) as exc:
                # A missing keyword is a programming error; keep the
                # template and the arguments so that nothing is hidden.
                message = '%s (formatting failed: %r, args %r)' % (
                    self.msg_fmt, exc, kwargs)
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


class _ExpectedStatuses(NovaPciMdevException):
    """Formats a ``hopestatus`` collection as a sorted, readable list."""

    def __init__(self, message=None, **kwargs):
        hope = kwargs.get('hopestatus')
        if isinstance(hope, (list, tuple, set, frozenset)):
            kwargs['hopestatus'] = ', '.join(sorted(hope))
        super().__init__(message, **kwargs)


# -- bad input and configuration (the CLI exits 2) ----------------------------

class Invalid(NovaPciMdevException):
    msg_fmt = 'Invalid input: %(reason)s'


class InvalidValue(Invalid):
    """A field of an object got a value that breaks the field's rule."""

    msg_fmt = 'Invalid %(field)s %(value)r: %(rule)s'


class InvalidPciAddress(InvalidValue):
    msg_fmt = ('Invalid device address %(value)r: %(rule)s')


class ConfigError(Invalid):
    """One problem in the configuration, naming option, value and rule.

    ``severity`` is ``'error'`` (the configuration cannot be used) or
    ``'warning'`` (see :class:`ConfigWarning`).
    """

    msg_fmt = '[%(group)s] %(option)s = %(value)s: %(rule)s'
    severity = 'error'


class ConfigWarning(ConfigError):
    """A configuration problem that does not stop the service."""

    msg_fmt = '[%(group)s] %(option)s = %(value)s: %(rule)s (warning)'
    severity = 'warning'


class ConfigNote(ConfigWarning):
    """What the host makes of a piece of configuration (no problem)."""

    msg_fmt = '[%(group)s] %(option)s = %(value)s: %(rule)s'
    severity = 'note'


class ConfigErrors(Invalid):
    """Every problem found in one validation run (``errors`` keeps them)."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__(
            message='%d configuration problem(s):\n%s' % (
                len(self.errors), '\n'.join(str(e) for e in self.errors)))


class InvalidAlias(Invalid):
    msg_fmt = 'Invalid PCI alias %(alias)r: %(reason)s'


class InvalidExtraSpec(Invalid):
    msg_fmt = 'Invalid flavor extra spec %(key)s=%(value)r: %(reason)s'


class HostDescriptionInvalid(NovaPciMdevException):
    """What the host reports (node-device or capabilities XML, the sidecar
    of a test host) cannot be used. A host failure, not bad input: the CLI
    exits 3 for all of them (issue 15)."""

    msg_fmt = 'Host description invalid: %(reason)s'


class NodeDeviceXMLInvalid(HostDescriptionInvalid):
    """The XML of one libvirt node device cannot be used."""

    msg_fmt = 'Node device %(device)s: invalid XML: %(reason)s'


class NodeDeviceLeftOut(HostDescriptionInvalid):
    """A node device discovery leaves out (its XML cannot be used, its
    address or UUID is claimed by another node device too, it is an mdev
    whose parent is missing, left out or no mdev parent, or an mdev parent
    that is neither a PCI function nor a virtual device): reported as a
    warning, the rest of the host stays usable. Besides ``device`` and
    ``reason`` it may carry what is known of the device: ``address`` (an
    mdev's UUID), ``dev_type``, ``mdev_type``, ``parent`` (the parent as
    the mdev names it) and ``parent_addr`` (its address, when known),
    ``mdev_types`` (comma-separated, of a parent)."""

    msg_fmt = 'Node device %(device)s left out: %(reason)s'
    severity = 'warning'


class NodeDeviceValueCapped(HostDescriptionInvalid):
    """A count a node device reports beyond what the objects, Nova's
    database and Placement hold: the cap is used instead, with this
    warning (never a wrapped or zeroed value)."""

    msg_fmt = ('Node device %(device)s: %(field)s %(value)s is more than '
               '%(cap)s, the most a count of Nova\'s objects and Placement\'s '
               'inventories holds; %(cap)s is used')
    severity = 'warning'


class CapabilitiesXMLInvalid(HostDescriptionInvalid):
    """The host capabilities XML cannot be used."""

    msg_fmt = 'Host capabilities XML invalid: %(reason)s'


class TopologySidecarInvalid(HostDescriptionInvalid):
    """A NUMA topology sidecar file is unreadable or breaks its format."""

    msg_fmt = 'NUMA topology file %(path)s: %(reason)s'


class LibvirtXmlError(Invalid):
    """Libvirt XML that cannot be read into a config object."""

    msg_fmt = 'Invalid libvirt XML for <%(element)s>: %(reason)s'


# -- objects and the device state machine -------------------------------------

class ObjectActionError(NovaPciMdevException):
    msg_fmt = 'Object action %(action)s failed: %(reason)s'


class PciDeviceInvalidStatus(_ExpectedStatuses):
    msg_fmt = ('PCI device %(address)s is %(status)s, expected one of '
               '%(hopestatus)s')


class PciDeviceInvalidOwner(NovaPciMdevException):
    msg_fmt = ('PCI device %(address)s is owned by %(owner)s instead of '
               '%(hopeowner)s')


class PciDeviceChildrenBusy(NovaPciMdevException):
    msg_fmt = ('Parent device %(address)s cannot be used whole: children '
               '%(children)s are not free')


class PciDeviceParentBusy(_ExpectedStatuses):
    msg_fmt = ('Device %(address)s cannot be used: its parent '
               '%(parent_addr)s is %(status)s, expected one of '
               '%(hopestatus)s')


class PciDeviceNotFound(NovaPciMdevException):
    msg_fmt = 'PCI device %(address)s not found'


# -- requests that do not fit (the CLI exits 1) -------------------------------

class RequestNotSatisfiable(NovaPciMdevException):
    msg_fmt = 'Request cannot be satisfied: %(reason)s'


class PciDeviceRequestFailed(RequestNotSatisfiable):
    msg_fmt = 'PCI device request failed: %(reason)s'


class LiveMigrationRefused(RequestNotSatisfiable):
    """A live move these two hosts (or these devices) cannot do: too old
    a libvirt or QEMU, a device that is not live-migratable, no device of
    the same type on the destination."""

    msg_fmt = 'Cannot live-migrate %(what)s: %(reason)s'


# -- host, mdevs, state and Placement (the CLI exits 3) -----------------------

class HypervisorError(NovaPciMdevException):
    msg_fmt = 'Hypervisor error on %(device)s: %(reason)s'


class MdevError(NovaPciMdevException):
    msg_fmt = 'Mediated device %(uuid)s on parent %(parent)s: %(reason)s'


class MdevNotFound(MdevError):
    """The mdev to act on does not exist (``errno`` is ``ENOENT``)."""


class MdevTypeError(MdevError):
    """A parent does not expose an mdev type, or its count is unreadable."""

    msg_fmt = 'mdev type %(mdev_type)s on parent %(parent)s: %(reason)s'


class VgpuVfError(NovaPciMdevException):
    """The ``nvidia/`` sysfs directory of an NVIDIA vGPU VF (the vendor-
    specific VFIO framework) refused a write or holds what it should not;
    ``address`` is the VF (or the file) at fault."""

    msg_fmt = 'NVIDIA vGPU VF %(address)s: %(reason)s'


class VgpuTypeNotCreatable(RequestNotSatisfiable):
    """A VF cannot take a vGPU type now (the driver no longer lists it)."""

    msg_fmt = ('NVIDIA vGPU VF %(address)s cannot take vGPU type '
               '%(mdev_type)s now: %(reason)s')


class StoreError(NovaPciMdevException):
    msg_fmt = 'State store %(path)s: %(reason)s'


class PlacementError(NovaPciMdevException):
    """Placement answered an error (or could not be reached).

    ``method``, ``url``, ``status`` (None when unreachable), ``code``
    (Placement's error code, e.g. ``placement.concurrent_update``) and
    ``detail`` (Placement's message) are kept as attributes.
    """

    msg_fmt = ('Placement %(method)s %(url)s failed: %(status)s '
               '%(code)s: %(detail)s')

    def __init__(self, message=None, **kwargs):
        self.method = kwargs.get('method')
        self.url = kwargs.get('url')
        self.status = kwargs.get('status')
        self.code = kwargs.get('code')
        self.detail = kwargs.get('detail')
        super().__init__(message, **kwargs)


class PlacementConflict(PlacementError):
    """HTTP 409: a generation conflict that retries did not resolve, no
    capacity left for an allocation, or a provider still in use."""
