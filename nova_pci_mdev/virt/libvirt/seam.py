"""The one seam between the project and libvirt-python.

This is the only product module that imports ``libvirt``, and only inside
:func:`real`. Everything that talks to libvirt (:class:`.host.Host`, the
libvirt mdev backend) is handed a :class:`Libvirt`: the constants it needs
by role, :meth:`Libvirt.open`, and :meth:`Libvirt.translate`, the one place
that decides what a libvirt error becomes in the project
(:class:`~nova_pci_mdev.exception.HypervisorError` naming the device, the
action, libvirt's message and its error code).

A :class:`Libvirt` is built from a module that spells libvirt-python's
names (``libvirtError``, ``VIR_CONNECT_LIST_NODE_DEVICES_CAP_*``,
``VIR_ERR_*``, ``VIR_FROM_*``, ``open``): :func:`real` gives it the real
``libvirt``; the tests give it their fake libvirt module, which keeps its
own error class and symbolic error codes, so the same seam serves both and
no code compares codes with hard-coded numbers or guesses a libvirt error
from its accessors.

Invariant: :meth:`Libvirt.translate` wraps exactly the errors of the seam's
error class; any other exception (project errors included) is not its
business and comes back as None, for the caller to re-raise unchanged.
"""

from nova_pci_mdev import exception

#: The names a libvirt module must spell, by the role they play here.
_NAMES = {
    'error_class': 'libvirtError',
    'list_pci': 'VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV',
    'list_mdev_types': 'VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES',
    'list_mdev': 'VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV',
    'err_no_connect': 'VIR_ERR_NO_CONNECT',
    'err_no_node_device': 'VIR_ERR_NO_NODE_DEVICE',
    'err_system': 'VIR_ERR_SYSTEM_ERROR',
    'err_internal': 'VIR_ERR_INTERNAL_ERROR',
    'from_rpc': 'VIR_FROM_RPC',
    'from_remote': 'VIR_FROM_REMOTE',
}


class Libvirt:
    """libvirt-python as the project uses it (see the module docstring).

    ``module``: the real ``libvirt`` or a stand-in that spells the same
    names; a missing name is a programming error raised here, at once.
    ``open``: what opens a connection by URI (``module.open`` by default).
    """

    def __init__(self, module, open=None):
        self._open = open or module.open
        for role, name in _NAMES.items():
            setattr(self, role, getattr(module, name))
        #: listAllDevices flags of one discovery: PCI functions, virtual
        #: mdev parents (listed only under MDEV_TYPES) and mdevs.
        self.list_all = self.list_pci | self.list_mdev_types | self.list_mdev

    def open(self, uri):
        """A read-write connection to ``uri``; errors translated."""
        try:
            return self._open(uri)
        except self.error_class as exc:
            raise self.translate(exc, uri, 'open') from exc

    def is_error(self, exc):
        return isinstance(exc, self.error_class)

    def code(self, exc):
        """libvirt's error code of ``exc`` (a libvirt error)."""
        return exc.get_error_code()

    def translate(self, exc, device, action=None):
        """The :class:`~nova_pci_mdev.exception.HypervisorError` for libvirt
        error ``exc`` of ``action`` on ``device``; None when ``exc`` is not
        a libvirt error. ``kwargs['code']`` holds libvirt's error code and
        ``kwargs['reason']`` the text (:meth:`reason`)."""
        if not self.is_error(exc):
            return None
        return exception.HypervisorError(device=device,
                                         reason=self.reason(exc, action),
                                         code=self.code(exc))

    def reason(self, exc, action=None):
        """``[<action> failed: ]<libvirt's message> (libvirt error code
        <code>)``: how every libvirt error reads in the project (the mdev
        backend puts it in its ``MdevError``)."""
        what = '%s (libvirt error code %s)' % (exc, self.code(exc))
        return '%s failed: %s' % (action, what) if action else what

    def is_gone(self, exc):
        """True for a libvirt error saying the node device does not exist
        (any more)."""
        return self.is_error(exc) and self.code(exc) == (
            self.err_no_node_device)

    def connection_lost(self, exc, conn):
        """True when libvirt error ``exc`` means that ``conn`` is gone.

        VIR_ERR_NO_CONNECT, or VIR_ERR_SYSTEM_ERROR / VIR_ERR_INTERNAL_ERROR
        raised by the RPC or remote layer; otherwise the connection's own
        ``isAlive()`` decides (a libvirt error from it, e.g. on a closed
        connection, means lost too).
        """
        code = self.code(exc)
        if code == self.err_no_connect:
            return True
        if (code in (self.err_system, self.err_internal)
                and exc.get_error_domain() in (self.from_rpc,
                                               self.from_remote)):
            return True
        try:
            return not conn.isAlive()
        except self.error_class:
            return True


def real():
    """The seam over the real ``libvirt`` module.

    libvirt's default error handler prints every error on stderr; it is
    replaced by a silent one (an idempotent call) each time a seam is made.
    """
    try:
        import libvirt
    except ImportError:
        raise exception.HypervisorError(
            device='libvirt', reason='libvirt-python is not installed')
    libvirt.registerErrorHandler(lambda *args: None, None)
    return Libvirt(libvirt)
