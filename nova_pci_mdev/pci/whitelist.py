"""The whitelist: which host devices may be assigned, and with which tags.

Built from the values of ``[pci] device_spec`` (each a JSON object or a
list of them). An empty whitelist assigns nothing, as in Nova.

Invariants:

* ``match(dev)`` returns the first spec in configuration order that covers
  ``dev`` (its tags are the device's tags), or None.
* Matching cost does not grow with the number of specs that name exact
  values: specs with an exact address are indexed by address, specs with an
  exact vendor and/or product id by ``(vendor, product)``; only specs
  without any exact address or id are scanned. Matching N devices is
  O(N * (candidates + wildcard specs)). When no spec names an address,
  a device's address cannot change the answer: ``match`` then decides once
  per (vendor, product, dev_type, mdev_type, devname) and remembers it.
* ``from_config`` raises :class:`~nova_pci_mdev.exception.ConfigErrors`
  listing every bad entry, never only the first; ``parse`` appends the same
  problems to a caller's list and keeps the good entries.
"""

import operator

from nova_pci_mdev import exception
from nova_pci_mdev.pci import devspec
from nova_pci_mdev.pci import jsonopt

ANY = devspec.ANY


class Whitelist(object):
    """Indexed device specs; ``specs`` keeps them in configuration order.

    ``pure``: ``match`` depends on the device alone (the specs never
    change), so the tracker need not ask again about an unchanged record.
    """

    pure = True

    def __init__(self, specs=(), warnings=()):
        self.specs = tuple(sorted(specs, key=lambda s: s.position))
        self.warnings = tuple(warnings)
        self._by_address = {}
        self._by_ids = {}
        self._scan = []
        for spec in self.specs:
            exact = spec.address.exact if spec.address is not None else None
            if exact is not None:
                self._by_address.setdefault(exact, []).append(spec)
            elif spec.vendor_id != ANY or spec.product_id != ANY:
                self._by_ids.setdefault(
                    (spec.vendor_id, spec.product_id), []).append(spec)
            else:
                self._scan.append(spec)
        self._address_free = all(spec.address is None for spec in self.specs)
        self._decided = {}
        # A record's ids as given (case and all) -> its answer: a sync
        # asks about thousands of records with a few distinct ids.
        self._by_record = {}

    def __repr__(self):
        return 'Whitelist(%d specs)' % len(self.specs)

    @classmethod
    def from_config(cls, values, devname_resolver=None):
        """A whitelist from ``[pci] device_spec`` values, or ConfigErrors."""
        problems = []
        whitelist = cls.parse(values, problems,
                              devname_resolver=devname_resolver)
        if any(p.severity == 'error' for p in problems):
            raise exception.ConfigErrors(problems)
        return whitelist

    @classmethod
    def parse(cls, values, problems, devname_resolver=None,
              group='pci', option='device_spec'):
        """Parse what is valid; append a ConfigError per problem."""
        if values is None:
            values = []
        elif isinstance(values, str):
            values = [values]

        def report_entry(value, rule):
            problems.append(exception.ConfigError(
                group=group, option=option, value=value, rule=rule))

        specs = []
        for number, text in enumerate(values, 1):
            label = 'entry %d' % number
            data = jsonopt.load_json(
                text, lambda v, rule: report_entry(v, label + ': ' + rule))
            if data is jsonopt.INVALID:
                continue
            if isinstance(data, dict):
                items = [(label, data)]
            elif isinstance(data, list):
                items = [('%s.%d' % (label, i), d)
                         for i, d in enumerate(data, 1)]
            else:
                report_entry(jsonopt.show(text), '%s: expected a JSON object '
                             'or a list of objects' % label)
                continue
            for sub_label, entry in items:

                def report(key, value, rule):
                    problems.append(exception.ConfigError(
                        group=group, option=option, value=value, rule=rule,
                        key=key))

                spec = devspec.parse_spec(
                    entry, len(specs), sub_label, report,
                    devname_resolver=devname_resolver)
                if spec is not None:
                    specs.append(spec)
        return cls(specs)

    def _candidate_lists(self, view):
        yield self._by_address.get(view.address)
        if view.parent_addr:
            yield self._by_address.get(view.parent_addr)
        if self._by_ids:
            yield self._by_ids.get((view.vendor_id, view.product_id))
            yield self._by_ids.get((view.vendor_id, ANY))
            yield self._by_ids.get((ANY, view.product_id))
        yield self._scan

    def match(self, dev):
        """The first spec covering ``dev`` (record dict or PciDevice)."""
        if self._address_free:
            raw = _record_key(dev)
            if raw is not None:
                try:
                    return self._by_record[raw]
                except KeyError:
                    pass
            key = _address_free_key(dev)
            try:
                found = self._decided[key]
            except KeyError:
                found = self._decided[key] = self._match(dev)
            except TypeError:       # an unhashable value: not remembered
                return self._match(dev)
            if raw is not None:
                self._by_record[raw] = found
            return found
        return self._match(dev)

    def _match(self, dev):
        view = devspec.view_of(dev)
        best = None
        for candidates in self._candidate_lists(view):
            for spec in candidates or ():
                if best is not None and spec.position >= best.position:
                    break
                if spec.match(view):
                    best = spec
                    break
        return best

    def matching(self, dev):
        """Every spec covering ``dev``, in configuration order (a new
        list; remembered like :meth:`match` when no spec names an
        address)."""
        if self._address_free:
            key = ('all', _address_free_key(dev))
            try:
                found = self._decided.get(key)
            except TypeError:       # an unhashable value: not remembered
                return self._matching(dev)
            if found is None:
                found = self._decided[key] = self._matching(dev)
            return list(found)
        return self._matching(dev)

    def _matching(self, dev):
        view = devspec.view_of(dev)
        found = {}
        for candidates in self._candidate_lists(view):
            for spec in candidates or ():
                if spec.position not in found and spec.match(view):
                    found[spec.position] = spec
        return [found[k] for k in sorted(found)]

    def unmatched(self, devices):
        """Specs that cover none of ``devices`` (to report as warnings)."""
        used = set()
        for dev in devices:
            used.update(spec.position for spec in self.matching(dev))
        return [spec for spec in self.specs if spec.position not in used]


_KEY_FIELDS = ('vendor_id', 'product_id', 'dev_type', 'mdev_type',
               'extra_info')


_RECORD_IDS = operator.itemgetter('vendor_id', 'product_id', 'dev_type',
                                  'mdev_type')


def _record_key(dev):
    """What :func:`_address_free_key` reads of a device record, as given
    (equal keys, equal answers), when it is hashable, the record has each
    of these keys and its ``extra_info`` is a dict or None; None
    otherwise."""
    if type(dev) is not dict:
        return None
    extra = dev.get('extra_info')
    if extra is not None and type(extra) is not dict:
        return None
    try:
        raw = _RECORD_IDS(dev) + (dev.get('devname'),
                                  extra.get('devname') if extra else None)
        hash(raw)
    except (KeyError, TypeError):
        return None
    return raw


def _address_free_key(dev):
    """What a spec without an address reads of ``dev``: equal keys, equal
    answers of :meth:`DevSpec.match` for such specs."""
    if type(dev) is dict:       # a device record
        get = dev.get
        vendor, product, extra = (get('vendor_id'), get('product_id'),
                                  get('extra_info'))
        return ((vendor or '').lower(), (product or '').lower(),
                get('dev_type'), get('mdev_type'),
                get('devname') or (extra or {}).get('devname'))
    values = getattr(dev, 'stored_values', None)
    if values is not None:      # our objects (no devname field)
        vendor, product, dev_type, mdev_type, extra = values(_KEY_FIELDS)
        devname = None
    else:
        get = devspec.getter(dev)
        vendor, product, dev_type, mdev_type, extra = (
            get(name) for name in _KEY_FIELDS)
        devname = get('devname')
    return ((vendor or '').lower(), (product or '').lower(), dev_type,
            mdev_type, devname or (extra or {}).get('devname'))
