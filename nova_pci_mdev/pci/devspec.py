"""Device specs: one entry of ``[pci] device_spec`` and how it matches.

An entry has Nova's keys (``vendor_id``, ``product_id``, ``address`` as a
glob string or a regex dict, ``devname``), the new keys ``mdev_type`` (exact
name or glob) and ``max_instances`` (with ``mdev_type`` only: at most that
many mdevs of each parent the entry covers, existing ones included; the
per-parent limit of the PCI path, as in the Nova series; no pool tag) and
any other key as a string tag (``physical_network``, ``trusted``,
``remote_managed``...).

Invariants:

* Parsing never raises on bad input: every problem is appended to the
  caller's ``errors`` list as a :class:`~nova_pci_mdev.exception.ConfigError`
  naming option, value and rule, and the entry is dropped (``None``).
* A parsed :class:`DevSpec` is never mutated. Its ids are ``'*'`` or four
  lower-case hex digits; its ``tags`` map strings to strings, boolean-like
  tags normalised to ``'true'``/``'false'``.
* Matching reads only the device's own fields (``vendor_id``,
  ``product_id``, ``address``, ``parent_addr``, ``dev_type``, ``mdev_type``,
  ``devname``): no lookups, no I/O. A spec covers a child through its
  ``parent_addr``: an mdev slot (``mdev-vf``) when any address spec matches
  its parent; a ``type-VF``/``vdpa`` when the spec names one exact address
  (Nova's rule for PF addresses). ``mdev_type`` matches slots of that type
  and parents that expose it.
"""

import fnmatch
import json
import re

from oslo_utils import strutils

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import address_spec
from nova_pci_mdev.pci import jsonopt

ANY = address_spec.ANY
show = jsonopt.show
DevType = fields.PciDeviceType

_HEX_ID_RE = re.compile(r'^[0-9a-fA-F]{1,4}\Z')
_DEVNAME_RE = re.compile(r'^[A-Za-z0-9_.:@-]{1,64}\Z')
_MDEV_GLOB_RE = re.compile(r'^[A-Za-z0-9_.:*?\[\]!-]{1,128}\Z')
_GLOB_CHARS = frozenset('*?[')
#: Tags normalised to 'true'/'false' (strict boolean strings).
BOOL_TAGS = ('managed', 'live_migratable', 'one_time_use', 'remote_managed',
             'trusted')
#: Keys that name pool or device fields and so cannot be tags.
RESERVED_TAGS = frozenset(('dev_type', 'numa_node', 'count', 'parent_addr',
                           'label', 'dev_id', 'extra_info', 'status',
                           'instance_uuid', 'request_id', 'devices'))
ID_RULE = 'expected 1 to 4 hex digits or "*"'


def parse_bool_tag(value):
    """Return 'true'/'false' for a boolean-like string or bool, or raise."""
    if isinstance(value, str):
        try:
            value = strutils.bool_from_string(value, strict=True)
        except ValueError:
            pass
    if isinstance(value, bool):
        return 'true' if value else 'false'
    raise ValueError(value)


# -- devices ----------------------------------------------------------------

class DeviceView(object):
    """The fields of a device record dict or a PciDevice that specs read."""

    __slots__ = ('address', 'parent_addr', 'vendor_id', 'product_id',
                 'dev_type', 'mdev_type', 'devname')

    def __init__(self, dev):
        get = getter(dev)
        self.address = _norm_address(get('address'))
        self.parent_addr = _norm_address(get('parent_addr'))
        self.vendor_id = (get('vendor_id') or '').lower()
        self.product_id = (get('product_id') or '').lower()
        self.dev_type = get('dev_type')
        self.mdev_type = get('mdev_type')
        extra = get('extra_info') or {}
        self.devname = get('devname') or extra.get('devname')


def getter(dev):
    if isinstance(dev, dict):
        return dev.get
    stored = getattr(dev, 'stored', None)
    if stored is not None:      # our objects: the value held, or None
        return stored
    if hasattr(dev, 'obj_attr_is_set'):
        fieldset = getattr(dev, 'fields', {})

        def get(name):
            if name in fieldset:
                return (getattr(dev, name)
                        if dev.obj_attr_is_set(name) else None)
            return None
        return get
    return lambda name: getattr(dev, name, None)


def _norm_address(address):
    if isinstance(address, str) and (names.is_pci_address(address) or
                                     names.is_uuid(address)):
        return address.lower()
    return address


def view_of(dev):
    return dev if isinstance(dev, DeviceView) else DeviceView(dev)


class DevSpec(object):
    """One parsed device spec; ``position`` orders specs as configured."""

    def __init__(self, position=0, vendor_id=ANY, product_id=ANY,
                 address=None, devname=None, mdev_type=None, tags=None,
                 source=None, max_instances=None):
        self.position = position
        self.max_instances = max_instances
        self.vendor_id = vendor_id
        self.product_id = product_id
        self.address = address
        self.devname = devname
        self.mdev_type = mdev_type
        self._mdev_glob = bool(mdev_type and _GLOB_CHARS & set(mdev_type))
        self.tags = dict(tags or {})
        self.source = source

    def __repr__(self):
        return 'DevSpec(#%s %s)' % (self.position, self.source)

    def match(self, dev):
        """True if ``dev`` (record dict, PciDevice or view) is covered."""
        v = view_of(dev)
        if self.vendor_id != ANY and self.vendor_id != v.vendor_id:
            return False
        if self.product_id != ANY and self.product_id != v.product_id:
            return False
        if self.mdev_type is not None:
            if not isinstance(v.mdev_type, str) or not (
                    fnmatch.fnmatchcase(v.mdev_type, self.mdev_type)
                    if self._mdev_glob else v.mdev_type == self.mdev_type):
                return False
        if self.devname is not None and v.devname != self.devname:
            return False
        if self.address is None or self.address.match(v.address):
            return True
        if not v.parent_addr:
            return False
        if v.dev_type == DevType.MDEV_VF or (
                self.address.exact is not None and
                v.dev_type in DevType.CHILD_TYPES):
            return self.address.match(v.parent_addr)
        return False


def _parse_id(value, bad):
    if value == ANY:
        return ANY
    if isinstance(value, str) and _HEX_ID_RE.match(value.strip()):
        return '%04x' % int(value.strip(), 16)
    return bad(show(value), ID_RULE)


def _parse_devname(value, bad):
    if (isinstance(value, str) and _DEVNAME_RE.match(value)
            and value not in ('.', '..')):
        return value
    return bad(show(value), 'expected an interface name of letters, '
               'digits, "_.:@-" (at most 64 characters)')


def _parse_mdev_type(value, bad):
    """An exact type name or a glob of type names."""
    if isinstance(value, str) and _GLOB_CHARS & set(value):
        if _MDEV_GLOB_RE.match(value):
            return value
        return bad(show(value), 'an mdev type glob has letters, digits, '
                   '"_.:-" and "*?[]!" (at most 128)')
    try:
        return names.validate_mdev_type(value)
    except exception.Invalid:
        return bad(show(value), names.MDEV_TYPE_RULE)


#: The largest ``max_instances`` (Placement's and the objects' integers).
MAX_INSTANCES = 2 ** 31 - 1
MAX_INSTANCES_RULE = 'expected a positive integer (at most %d)' % (
    MAX_INSTANCES)


def _parse_max_instances(value, bad):
    """A positive int (a JSON number, or a string of decimal digits)."""
    number = value
    if (isinstance(value, str) and value.isascii() and value.isdigit()
            and len(value) <= 10):
        number = int(value)
    if (isinstance(number, int) and not isinstance(number, bool)
            and 1 <= number <= MAX_INSTANCES):
        return number
    return bad(show(value), MAX_INSTANCES_RULE)


#: The parser of each key that is a field of the spec (any other key is a
#: tag): ``parser(value, bad) -> parsed``, or the None ``bad(shown value,
#: rule)`` returns after recording the problem.
FIELD_PARSERS = {
    'vendor_id': _parse_id,
    'product_id': _parse_id,
    'address': address_spec.parse_address,
    'devname': _parse_devname,
    'mdev_type': _parse_mdev_type,
    'max_instances': _parse_max_instances,
}


def _parse_tag(key, value, bad):
    """A tag's string value (booleans normalised), or None after ``bad``."""
    if not isinstance(key, str) or not key.strip():
        return bad(show(key), 'a tag name must be a non-empty string')
    if key in RESERVED_TAGS:
        return bad(show(value), 'reserved: a device field cannot be a tag')
    if key in BOOL_TAGS or isinstance(value, bool):
        try:
            return parse_bool_tag(value)
        except ValueError:
            return bad(show(value), 'expected a boolean such as "true", '
                       '"false", "yes" or "no"')
    if isinstance(value, (str, int, float)):
        return str(value)
    return bad(show(value), 'a tag value must be a string')


def parse_spec(entry, position, label, report, devname_resolver=None):
    """A :class:`DevSpec` from one JSON object, or None after ``report``.

    ``report(key, value, rule)`` records one problem; ``label`` names the
    entry in messages (``entry 2``). ``devname_resolver(devname)`` may map
    an interface name to a device address (I/O belongs to the caller).
    Each key goes to its :data:`FIELD_PARSERS` entry, or is a tag.
    """
    if not isinstance(entry, dict):
        report(None, show(entry), '%s: expected a JSON object' % label)
        return None
    problems = []

    def bad_for(key):
        def bad(value, rule):
            problems.append(key)
            report(key, value, '%s, key "%s": %s' % (label, key, rule))
        return bad

    kw = {}
    tags = {}
    for key, value in entry.items():
        parser = FIELD_PARSERS.get(key)
        parsed = (parser(value, bad_for(key)) if parser is not None
                  else _parse_tag(key, value, bad_for(key)))
        if parsed is not None:
            (kw if parser is not None else tags)[key] = parsed
    if 'address' in entry and 'devname' in entry:
        bad_for('devname')(show(entry['devname']),
                           'devname and address cannot be used together')
    if 'max_instances' in entry and 'mdev_type' not in entry:
        bad_for('max_instances')(
            show(entry['max_instances']),
            'needs "mdev_type" in the same entry: it limits the mdevs of '
            'each parent the entry covers')
    if 'devname' in kw and devname_resolver is not None and not problems:
        _resolve_devname(kw, devname_resolver, bad_for('devname'))
    if problems:
        return None
    return DevSpec(position=position, tags=tags,
                   source=json.dumps(entry, sort_keys=True), **kw)


def _resolve_devname(kw, resolver, bad):
    """Replace ``kw['devname']`` by the address ``resolver`` gives."""
    resolved = resolver(kw['devname'])
    if not resolved:
        return
    try:
        kw['address'] = address_spec.ExactAddress(
            names.normalize_address(resolved))
    except exception.Invalid:
        bad(show(kw['devname']), 'resolves to %s, which is not a device '
            'address' % show(resolved))
        return
    del kw['devname']
