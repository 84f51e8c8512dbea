"""The ``address`` of a device spec: exact, glob or per-field regexes.

``parse_address`` turns the JSON value into an object with
``match(address) -> bool`` and ``exact`` (the one address it names, or
None): :class:`ExactAddress` for a PCI address, an mdev UUID or a virtual
parent name; :class:`GlobAddress` for Nova's
``[[[domain]:]bus]:][slot][.[function]]`` with ``*`` or empty fields;
:class:`RegexAddress` for a dict of regexes per field, matched at the start
of the field as in Nova. A bad value is reported through the caller's
``report(shown value, rule)`` and gives None. Pure, no I/O.
"""

import re

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.pci import jsonopt

ANY = '*'
show = jsonopt.show
_HEX_RE = re.compile(r'^[0-9a-fA-F]{1,8}\Z')
#: (name, width, maximum) of the four fields of a PCI address.
_ADDRESS_FIELDS = (('domain', 4, 0xFFFF), ('bus', 2, 0xFF),
                   ('slot', 2, 0x1F), ('function', 1, 0x7))
_REGEX_KEYS = tuple(f[0] for f in _ADDRESS_FIELDS)


def _split_pci(address):
    """(domain, bus, slot, function) of a PCI address string, or None."""
    if not isinstance(address, str):
        return None
    m = names.PCI_ADDRESS_RE.match(address)
    return tuple(g.lower() for g in m.groups()) if m else None


class ExactAddress(object):
    """One address: a PCI address, an mdev UUID or a virtual parent name."""

    def __init__(self, address):
        self.exact = address

    def match(self, address):
        return address == self.exact

    def __repr__(self):
        return 'ExactAddress(%s)' % self.exact


class _FieldwiseAddress(object):
    """Matches a PCI address field by field (domain, bus, slot, function);
    anything that is not a PCI address never matches."""

    exact = None

    def __init__(self, fields):
        self.fields = tuple(fields)

    def match(self, address):
        split = _split_pci(address)
        if split is None:
            return False
        return all(self._field_matches(f, v)
                   for f, v in zip(self.fields, split))


class GlobAddress(_FieldwiseAddress):
    """``[[[domain]:]bus]:][slot][.[function]]``; None fields match all."""

    @staticmethod
    def _field_matches(part, value):
        return part is None or part == value

    def __repr__(self):
        return 'GlobAddress(%s)' % ':'.join(p or ANY for p in self.fields)


class RegexAddress(_FieldwiseAddress):
    """Regexes per field, matched at the start of the field like Nova."""

    @staticmethod
    def _field_matches(regex, value):
        return regex.match(value) is not None


def _parse_glob(text, report):
    if len(text) > 64:
        report(show(text), 'an address glob has at most 64 characters')
        return None
    dbs, _sep, func = text.partition('.')
    head = dbs.split(':') if dbs else []
    if len(head) > 3:
        report(show(text), 'expected [[[domain]:]bus]:][slot][.[function]] '
               'with at most three ":"-separated fields')
        return None
    raw = [ANY] * (3 - len(head)) + head + [func]
    parts = []
    for (name, width, maximum), value in zip(_ADDRESS_FIELDS, raw):
        value = value.strip()
        if value in ('', ANY):
            parts.append(None)
            continue
        if not _HEX_RE.match(value):
            report(show(text), '%s %s is not "*" or a hex number'
                   % (name, show(value)))
            return None
        number = int(value, 16)
        if number > maximum:
            report(show(text), '%s %s is greater than the maximum %X'
                   % (name, show(value), maximum))
            return None
        parts.append('%0*x' % (width, number))
    if None not in parts:
        return ExactAddress('%s:%s:%s.%s' % tuple(parts))
    return GlobAddress(parts)


def _is_name_address(text):
    """A UUID or virtual parent name (``mtty``) rather than a PCI glob."""
    if names.is_uuid(text):
        return True
    if any(c in text for c in ':.*') or all(
            c in '0123456789abcdefABCDEF' for c in text):
        return False
    return bool(names.PARENT_NAME_RE.fullmatch(text))


def parse_address(value, report):
    """An address spec from a glob string or regex dict, or None."""
    if isinstance(value, str):
        if value and _is_name_address(value):
            try:
                return ExactAddress(names.normalize_address(value))
            except exception.InvalidPciAddress as exc:
                report(show(value), exc.kwargs['rule'])
                return None
        return _parse_glob(value, report)
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(_REGEX_KEYS))
        if unknown:
            report(show(value), 'unknown address key(s) %s; allowed: %s'
                   % (', '.join(unknown), ', '.join(_REGEX_KEYS)))
            return None
        regexes = []
        ok = True
        for key in _REGEX_KEYS:
            pattern = value.get(key, '.*')
            if not isinstance(pattern, str):
                report(show(value), 'address %s %s must be a string regex'
                       % (key, show(pattern)))
                ok = False
                continue
            try:
                regexes.append(re.compile(pattern))
            except (re.error, RecursionError, OverflowError) as exc:
                report(show(value), 'address %s %s is not a valid regex (%s)'
                       % (key, show(pattern), exc))
                ok = False
        return RegexAddress(regexes) if ok else None
    report(show(value), 'address must be a glob string or a dict of regexes '
           'with keys %s' % ', '.join(_REGEX_KEYS))
    return None
