"""Per-type mdev settings read from the ``[mdev_<type>]`` groups.

Invariants:

* An :class:`MdevTypeOptions` is immutable and valid: ``mdev_type`` is a
  safe sysfs name, ``device_addresses`` are normalised addresses (PCI
  lower-case, virtual parent names as written), ``resource_class`` is
  ``VGPU`` or ``CUSTOM_[A-Z0-9_]+`` (at most 255 characters) and
  ``max_instances`` is None or a positive int: the limit of the type's
  mdevs per host (see :mod:`.settings` for its deprecated per-parent
  reading).
* :func:`read_mdev_types` never raises on bad values: it appends one
  ConfigError per problem and leaves out the types that have one.
* An address is listed by at most one type; later groups that list it
  again are reported.
"""

import dataclasses
import re

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.conf import devices

DEFAULT_CLASS = 'VGPU'
CUSTOM_PREFIX = 'CUSTOM_'
MAX_CLASS_LEN = 248
_CLASS_RE = re.compile(r'^[A-Za-z0-9_]{1,%d}\Z' % MAX_CLASS_LEN)
CLASS_RULE = ('expected VGPU or letters, digits and "_" (at most %d '
              'characters)' % MAX_CLASS_LEN)


@dataclasses.dataclass(frozen=True)
class MdevTypeOptions:
    mdev_type: str
    device_addresses: tuple = ()
    mdev_class: str = DEFAULT_CLASS
    resource_class: str = DEFAULT_CLASS
    max_instances: int | None = None


def resource_class_for(mdev_class):
    """The Placement resource class of an ``mdev_class`` value.

    ``VGPU`` (any case) stays ``VGPU``; ``mlx5`` becomes ``CUSTOM_MLX5``;
    ``CUSTOM_FOO`` (any case) is kept, upper-cased. Raises InvalidValue.
    """
    if not isinstance(mdev_class, str) or not _CLASS_RE.match(mdev_class):
        raise exception.InvalidValue(field='mdev_class', value=mdev_class,
                                     rule=CLASS_RULE)
    upper = mdev_class.upper()
    if upper == DEFAULT_CLASS:
        return DEFAULT_CLASS
    if upper.startswith(CUSTOM_PREFIX):
        if upper == CUSTOM_PREFIX:
            raise exception.InvalidValue(
                field='mdev_class', value=mdev_class,
                rule='CUSTOM_ must be followed by a name')
        return upper
    return CUSTOM_PREFIX + upper


def _read(conf, group, option, report):
    """``(ok, value)``; an unreadable option is reported."""
    value, reason = devices.safe_get(conf, group, option)
    if reason is None:
        return True, value
    # int()'s message already quotes the value as repr() does: keep it.
    raw = re.search(r"base 10: ((['\"]).*\2)\Z", reason, re.DOTALL)
    if raw:
        report(group, option, raw.group(1), 'expected a positive integer')
    else:
        report(group, option, '(unreadable)', reason)
    return False, None


def _device_addresses(conf, group, mdev_type, owner, report, problems):
    """The normalised ``device_addresses`` of ``[group]``; an address
    another type lists (``owner``: address -> first type) is refused."""
    _ok, raw_addresses = _read(conf, group, 'device_addresses', report)
    addresses = []
    for raw in raw_addresses or ():
        try:
            address = names.normalize_address(raw.strip())
        except exception.Invalid:
            report(group, 'device_addresses', repr(raw), names.ADDRESS_RULE)
            continue
        if address in owner:
            first = owner[address]
            if first == mdev_type:
                problems.append(exception.ConfigWarning(
                    group=group, option='device_addresses',
                    value=repr(raw), rule='listed twice'))
            else:
                report(group, 'device_addresses', repr(raw),
                       'already listed in [%s] device_addresses; a '
                       'parent exposes one type' % devices.group_name(first))
            continue
        owner[address] = mdev_type
        addresses.append(address)
    return addresses


def read_mdev_types(conf, enabled, problems):
    """``{type: MdevTypeOptions}`` in ``enabled`` order; report problems.

    ``enabled`` holds validated type names whose groups are registered.
    """
    def report(group, option, value, rule):
        problems.append(exception.ConfigError(
            group=group, option=option, value=value, rule=rule))

    result = {}
    owner = {}   # address -> type that lists it first
    for mdev_type in enabled:
        group = devices.group_name(mdev_type)
        count = len(problems)
        addresses = _device_addresses(conf, group, mdev_type, owner,
                                      report, problems)
        ok, mdev_class = _read(conf, group, 'mdev_class', report)
        resource_class = None
        if ok:
            try:
                resource_class = resource_class_for(mdev_class)
            except exception.InvalidValue as exc:
                report(group, 'mdev_class', repr(mdev_class),
                       exc.kwargs['rule'])
        ok, max_instances = _read(conf, group, 'max_instances', report)
        if ok and max_instances is not None and max_instances < 1:
            report(group, 'max_instances', repr(max_instances),
                   'expected a positive integer')
        if len(problems) != count and any(
                p.severity == 'error' for p in problems[count:]):
            continue
        result[mdev_type] = MdevTypeOptions(
            mdev_type=mdev_type, device_addresses=tuple(addresses),
            mdev_class=mdev_class, resource_class=resource_class,
            max_instances=max_instances)
    return result
