"""Bulk construction of versioned objects: a store's load, a sync's new
devices.

Both build thousands of objects whose values repeat (vendor ids, types,
statuses, ``extra_info``). Every value still goes through its field's own
``coerce`` (the setter's validation), but each distinct value, or each
distinct record *shape*, is coerced once and its result shared when it is
immutable (str, int, float, bool, None) or copied per object when it is a
dict: no two objects share a mutable value. Values go where
oslo.versionedobjects keeps them (``base._storage_name``) and the changes
recorded are those its setters record; ``tests/unit/objects/test_bulk.py``
pins every builder to oslo's setters field kind by field kind.
"""

import operator
import secrets
import typing

from nova_pci_mdev.objects import base

_storage_name = base._storage_name
_SHARED_CHANGES = base.SHARED_CHANGES
_IMMUTABLE = (str, int, float, bool)
#: Types a record value of a remembered shape may have.
_SHAPE_TYPES = frozenset(_IMMUTABLE + (type(None),))


class Restorer(object):
    """Builds objects of ``cls`` from stored rows of the fields ``names``.

    For a bulk load (thousands of rows that repeat the same vendor ids,
    statuses, types): every value goes through its field's own ``coerce``
    (validation is exactly the setter's), but each distinct hashable value
    of a column is coerced once and its result, when immutable (str, int,
    float, bool, None), shared. ``None`` in a column whose field is not
    nullable leaves that field unset. The object records no change, as
    after setting every field and ``obj_reset_changes()``. Build one per
    load: it holds every distinct value it has seen.
    """

    def __init__(self, cls, names, ready=()):
        self.cls = cls
        self.names = tuple(names)
        #: Columns whose values the caller coerces (passed to __call__).
        self.ready = tuple(ready)
        self._columns = tuple(
            (name, _storage_name(name), cls.fields[name].coerce,
             cls.fields[name].nullable, {})
            for name in self.names if name not in self.ready)
        self._at = tuple(i for i, name in enumerate(self.names)
                         if name not in self.ready)
        self._ready = tuple(_storage_name(name) for name in self.ready)
        # The row's values of _columns, in one C call (always a tuple).
        at = self._at
        self._pick = (operator.itemgetter(*at) if len(at) > 1 else
                      lambda row: tuple(row[i] for i in at))

    def __call__(self, row, *ready):
        """An object from ``row`` (values in ``names`` order) and the
        values of the ``ready`` fields, already coerced by the caller."""
        obj = self.cls()
        stored = {}
        for (name, attr, coerce, nullable, memo), value in zip(
                self._columns, self._pick(row)):
            key = value if type(value) is str else (type(value), value)
            try:
                value = memo[key]
            except KeyError:
                if value is None and not nullable:
                    continue
                value = coerce(obj, name, value)
                if value is None or type(value) in _IMMUTABLE:
                    memo[key] = value
            except TypeError:        # unhashable: coerce every time
                value = coerce(obj, name, value)
            stored[attr] = value
        stored.update(zip(self._ready, ready))
        obj.__dict__.update(stored)
        return obj


class Maker(object):
    """Builds new objects of ``cls`` in bulk: what ``cls(**values)``
    gives (every value through its field's own ``coerce``, every field set
    recorded as changed), from a :class:`Template` per group of objects
    that hold the same values (:meth:`template`, coerced once) plus the
    few values that differ (:meth:`build`).

    The object is made as the constructor makes it, once: a new object
    gets the attributes ``cls()`` sets (copies of its empty containers,
    such as the set of changed fields), then the values. Should ``cls()``
    set anything but immutable values and empty sets, lists and dicts, the
    constructor is called for every object instead.
    """

    def __init__(self, cls):
        self.cls = cls
        #: name -> (where oslo stores it, its field's coerce, memo of
        #: coerced strings, its base._plain test or None, whether every
        #: exact str is plain)
        self._fields = {name: (_storage_name(name), field.coerce, {},
                               base._plain(field),
                               base._plain_kind(field) == (None,))
                        for name, field in cls.fields.items()}
        blank = vars(cls())
        self._blank = {k: v for k, v in blank.items()
                       if v is None or type(v) in _IMMUTABLE}
        self._fresh = tuple((k, type(v)) for k, v in blank.items()
                            if k not in self._blank
                            and k != '_changed_fields')
        self._new = None
        if type(blank.get('_changed_fields')) is set and all(
                kind in (set, list, dict) and not blank[k]
                for k, kind in self._fresh):
            self._new = cls.__new__

    def template(self, values):
        """``values`` (field name -> value) coerced once, for
        :meth:`build` (dict results are copied per object; a result that
        is neither immutable nor a dict is coerced again for each object,
        so no two objects share a mutable value)."""
        obj = self.cls()
        stored, dicts, again = dict(self._blank), [], {}
        for name, value in values.items():
            attr, coerce = self._fields[name][:2]
            coerced = coerce(obj, name, value)
            if coerced is None or type(coerced) in _IMMUTABLE:
                stored[attr] = coerced
            elif isinstance(coerced, dict):
                # A plain dict built item by item: one of strings is not
                # tracked by the garbage collector, nor are its copies.
                dicts.append((attr, {k: v for k, v in coerced.items()}))
            else:
                again[name] = value
        return Template(stored, tuple(dicts), again, frozenset(values), {})

    def plan(self, template, names, ready):
        """What :meth:`build` does with ``template`` for ``names`` (a
        tuple) and the keys of ``ready`` (a tuple): the frozenset of every
        field it sets, the steps of the names not in ``ready`` (name,
        storage name, coerce, memo, plain test, whether any exact str is
        plain) and the storage names of ``ready``. Remembered per
        template."""
        fields = self._fields
        found = template.plans[names, ready] = (
            template.names.union(names, ready),
            tuple((name,) + fields[name] for name in names
                  if name not in ready),
            tuple(fields[name][0] for name in ready))
        return found

    def build(self, template, ready=None, source=None, names=()):
        """A new object holding ``template``, then the values of
        ``names`` in ``source`` (a dict; each coerced by its field here:
        the values that differ from object to object, such as a name),
        then ``ready`` (stored as given: the caller validated them with
        the field's own rule; a name in it is not read from ``source``).
        Every field of the three is recorded as changed, as the setters
        do (in the frozenset the objects of one plan share,
        ``base.SHARED_CHANGES``, until one is touched)."""
        ready = ready or _NOTHING
        keys = tuple(ready)
        try:
            changes, steps, ready_attrs = template.plans[names, keys]
        except KeyError:
            changes, steps, ready_attrs = self.plan(template, names, keys)
        if self._new is None:
            obj = self.cls()
            stored = obj.__dict__
            stored.update(template.stored)
            obj._changed_fields.update(changes)
        else:
            obj = self._new(self.cls)
            stored = template.stored.copy()
            for attr, kind in self._fresh:
                stored[attr] = kind()
            stored[_SHARED_CHANGES] = changes
            obj.__dict__ = stored
        for attr, value in template.dicts:
            stored[attr] = value.copy()
        for name, attr, coerce, memo, plain, any_str in steps:
            value = source[name]
            if any_str and type(value) is str:
                stored[attr] = value
            elif plain is not None and plain(value):
                stored[attr] = value
            elif (value is None or type(value) is str) and value in memo:
                stored[attr] = memo[value]
            else:
                stored[attr] = _coerce(obj, name, value, coerce, memo)
        if template.again:
            fields = self._fields
            for name, value in template.again.items():
                stored[fields[name][0]] = fields[name][1](obj, name, value)
        for attr, value in zip(ready_attrs, ready.values()):
            stored[attr] = value
        return obj


_NOTHING = {}   # never written: no ready values
#: Values a field's memo remembers at most: a maker may live as long as
#: its tracker, and a field whose values never repeat (a slot's address)
#: must not grow with every object it made.
_MEMO_MOST = 4096


def _coerce(obj, name, value, coerce, memo):
    """``coerce(obj, name, value)``, remembered in ``memo`` (up to
    :data:`_MEMO_MOST` values) for a str or None that gives a str or
    None."""
    coerced = coerce(obj, name, value)
    if (value is None or type(value) is str) and (
            coerced is None or type(coerced) is str) and (
                len(memo) < _MEMO_MOST):
        memo[value] = coerced
    return coerced


class Template(typing.NamedTuple):
    """Coerced values shared by the objects :meth:`Maker.build` makes:
    ``stored`` (storage name -> immutable value), ``dicts`` ((storage
    name, dict) pairs, copied per object), ``again`` (field name -> raw
    value, coerced per object), ``names`` (the fields it sets) and
    ``plans`` (:meth:`Maker.plan`'s, remembered)."""

    stored: dict
    dicts: tuple
    again: dict
    names: frozenset
    plans: dict


class Shapes(object):
    """Objects from records (dicts), through one :class:`Template` per
    distinct record shape.

    ``to_values(record)`` maps a record to field values (the caller's
    rule). A record's *shape* is its keys in order, the values of every key
    but those in ``unique`` (the ones that differ from record to record,
    such as an address: they must map to the field of the same name as
    they are), the items of its ``nested`` dict (``extra_info``) and the
    types of all of these. Records of one shape map to the same values but
    for their ``unique`` keys, so the template of the first one serves
    them all and only the ``unique`` values are coerced per object
    (:meth:`Maker.build`). A shape with a value that is not hashable or
    not of a simple type (str, int, float, bool, None) is not remembered:
    its record is mapped and coerced on its own.
    """

    def __init__(self, maker, to_values, unique, nested):
        self._maker = maker
        self._to_values = to_values
        self._unique = frozenset(unique)
        self._nested = nested
        #: record keys -> (picker, unique keys, {shape: Template}): the
        #: shapes of records with those keys in that order
        self._pickers = {}

    def _picker(self, keys):
        shaped = [k for k in keys if k not in self._unique
                  and k != self._nested]
        unique = tuple(k for k in keys if k in self._unique)
        pick = (operator.itemgetter(*shaped) if len(shaped) > 1 else
                lambda record: tuple(record[k] for k in shaped))
        found = self._pickers[keys] = (pick, unique, {})
        return found

    def make(self, record, ready=None):
        """The object of ``record``; ``ready``: values stored as given
        (a ``unique`` key in it is not read from the record). A method,
        not ``__call__``: a bound method is called on CPython's fast path,
        an instance through its type's slot."""
        keys = tuple(record)
        try:
            pick, unique, templates = self._pickers[keys]
        except KeyError:
            pick, unique, templates = self._picker(keys)
        values = pick(record)
        nested = record.get(self._nested) or _NOTHING
        shape = None
        try:
            items = tuple(nested.items())
            shape = (values, items, tuple(map(type, values)),
                     tuple(map(type, nested.values())))
            template = templates[shape]
        except (KeyError, TypeError, AttributeError):
            template = self._template(record, unique, shape, templates)
        return self._maker.build(template, ready, record, unique)

    def _template(self, record, unique, shape, templates):
        values = self._to_values(record)
        for key in unique:
            values.pop(key, None)
        template = self._maker.template(values)
        try:
            if shape is not None and _SHAPE_TYPES.issuperset(
                    shape[2] + shape[3]):
                templates[shape] = template
        except TypeError:           # an unhashable value
            pass
        return template


def random_uuids(most=256):
    """``next_uuid()``: random (version 4, RFC 4122 variant) UUIDs in
    canonical form, as ``str(uuid.uuid4())`` gives, from one
    ``secrets.token_hex`` (``os.urandom``) call per batch (1, 2, 4...
    up to ``most`` UUIDs: a sync names every new device). The UUID
    field's rule holds by construction."""
    pending = []
    size = [1]

    def next_uuid():
        if not pending:
            text = secrets.token_hex(16 * size[0])
            pending.extend(_uuid4(text[i:i + 32])
                           for i in range(0, len(text), 32))
            size[0] = min(most, 2 * size[0])
        return pending.pop()
    return next_uuid


#: The hex digit of the variant nibble (binary 10xx) for a random one.
_VARIANT = {digit: '89ab'[int(digit, 16) & 3]
            for digit in '0123456789abcdef'}


def _uuid4(h):
    """The UUID of 32 random hex digits: version nibble 4, variant 10
    (the two digits they replace are dropped)."""
    return (f'{h[:8]}-{h[8:12]}-4{h[13:16]}-'
            f'{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}')
