"""Settings: the validated configuration the library works with.

Invariants: a Settings is built only from a configuration without
error-level problems (``warnings`` keeps the rest); it is immutable and
does no I/O. ``exposed_type`` answers in O(1) plus the number of enabled
types without ``device_addresses``.

``max_instances`` has one meaning per option, as in Nova and its series
(issue 27): ``[mdev_<type>] max_instances`` limits the mdevs of the type
on the host (the Placement path's budget), the ``[pci] device_spec`` key
``max_instances`` those of each parent its entry covers
(:meth:`Settings.parent_limits`). nova-pci-mdev read the group option per
parent before; a configuration without a device_spec ``max_instances``
for the type (:meth:`Settings.per_host` False) keeps that reading where
the two differ, deprecated (``check-config`` warns, see
:func:`nova_pci_mdev.pci.capacity.type_limits`).
"""

import dataclasses
import fnmatch

from nova_pci_mdev import exception
from nova_pci_mdev import names


@dataclasses.dataclass(frozen=True, eq=False)
class Settings:
    """The validated configuration (see the module docstring).

    ``whitelist`` (a ``pci.whitelist.Whitelist``) and ``aliases`` (a
    ``pci.request.AliasTable``) are built by :mod:`.validation`, which
    parses the options; this module only holds them (None in a Settings
    made by hand for the mdev type options alone).
    """

    whitelist: object = None
    aliases: object = None
    enabled_mdev_types: tuple = ()
    #: ``{type: conf.mdev.MdevTypeOptions}`` in enabled order.
    mdev_types: dict = dataclasses.field(default_factory=dict)
    warnings: tuple = ()

    def __post_init__(self):
        by_address = {}
        defaults = []
        for options in self.mdev_types.values():
            for address in options.device_addresses:
                by_address.setdefault(address, options)
            if not options.device_addresses:
                defaults.append(options)
        object.__setattr__(self, '_by_address', by_address)
        object.__setattr__(self, '_defaults', tuple(defaults))
        specs = getattr(self.whitelist, 'specs', None) or ()
        object.__setattr__(self, '_limited', tuple(
            s.mdev_type for s in specs
            if getattr(s, 'max_instances', None) is not None))

    def exposed_type(self, parent_addr, supported_types=None):
        """The MdevTypeOptions a parent exposes, or None.

        The type whose ``device_addresses`` lists ``parent_addr`` (even if
        the parent does not report it: an explicit mapping wins, as in
        Nova), else the first enabled type without ``device_addresses``
        that the parent supports. ``supported_types`` None means "any".
        """
        supported = (None if supported_types is None
                     else frozenset(supported_types))
        try:
            key = names.normalize_address(parent_addr)
        except exception.Invalid:
            key = parent_addr
        options = self._by_address.get(key)
        if options is not None:
            return options
        for options in self._defaults:
            if supported is None or options.mdev_type in supported:
                return options
        return None

    def parent_limits(self, parent):
        """``(covered, limit)`` of an mdev parent's record ``parent`` (its
        ``mdev_type`` the type it exposes): whether a ``[pci] device_spec``
        entry covers it (always, in a Settings without whitelist) and that
        entry's ``max_instances`` (None: no per-parent limit)."""
        if self.whitelist is None:
            return True, None
        spec = self.whitelist.match(parent)
        return spec is not None, getattr(spec, 'max_instances', None)

    def per_host(self, mdev_type):
        """True when ``[mdev_<mdev_type>] max_instances`` is read per host
        (Nova's meaning): a device_spec entry with ``max_instances`` names
        the type (exactly or by glob)."""
        return any(fnmatch.fnmatchcase(mdev_type, pattern)
                   for pattern in self._limited)

    def resource_class_of(self, mdev_type):
        """The resource class of an enabled type, or None."""
        options = self.mdev_types.get(mdev_type)
        return None if options is None else options.resource_class
