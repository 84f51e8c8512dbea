"""Object base classes and registry of nova-pci-mdev.

Our objects live in their own registry and namespace (``nova_pci_mdev``) so
that importing this library never touches Nova's registry. They continue
Nova's version history (``PciDevice`` 1.8 follows Nova's 1.7), so a primitive
can travel both ways: :meth:`NovaPciMdevObject.obj_from_primitive` accepts
Nova's ``nova`` namespace too, and :func:`obj_to_nova_primitive` emits it.
"""

import operator
import warnings

from oslo_utils import versionutils

with warnings.catch_warnings():
    # oslo.versionedobjects imports oslo.messaging, which imports eventlet,
    # which warns on import that it is deprecated. We never run eventlet;
    # the notice is silenced for this one import only (the filter is gone
    # afterwards), so any other code importing eventlet still sees it.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    from oslo_versionedobjects import base as ovo_base
    from oslo_versionedobjects import fields as ovo_fields

from nova_pci_mdev import exception

NAMESPACE = 'nova_pci_mdev'
NOVA_NAMESPACE = 'nova'


class NovaPciMdevObjectRegistry(ovo_base.VersionedObjectRegistry):
    """Keeps ``nova_pci_mdev.objects.<Name>`` at the newest version, and
    gives each registered class :func:`_fast_getters`."""

    def registration_hook(self, cls, index):
        _fast_getters(cls)
        from nova_pci_mdev import objects
        current = getattr(objects, cls.obj_name(), None)
        if current is None or (
                versionutils.convert_version_to_tuple(cls.VERSION) >=
                versionutils.convert_version_to_tuple(current.VERSION)):
            setattr(objects, cls.obj_name(), cls)


def _fast_getters(cls):
    """Read fields at C speed: each field property of ``cls`` gets
    ``operator.attrgetter`` of its stored value as getter, the setter of
    :func:`_plain_setter` and a deleter that reads no attribute. A field
    that holds no value finds the class's :class:`_Unset` under its
    storage name instead, which lazy-loads it as oslo's getter would
    (``obj_load_attr``). No ``__getattr__`` is involved: with one, every
    attribute read of the object (fields, links, methods) would take
    Python's slow path. Field reads are the inner loop of the tracker,
    the pools and the views: oslo's getter costs three Python calls each.
    Idempotent.
    """
    for name, field in cls.fields.items():
        prop = cls.__dict__.get(name)
        if isinstance(prop, property) and not isinstance(
                prop.fget, operator.attrgetter):
            attr = _storage_name(name)
            setattr(cls, attr, _Unset(name))
            setattr(cls, name, property(
                operator.attrgetter(attr),
                _plain_setter(name, field, prop.fset), _deleter(name),
                prop.__doc__))


class _Unset(object):
    """What a field's storage name finds on an object that holds no value
    for it: a class attribute and a non-data descriptor, so a stored
    value (an instance attribute of the same name) always hides it. Reading
    it lazy-loads the field (``obj_load_attr``) and returns the loaded
    value, or raises AttributeError when nothing was loaded: the
    behaviour of oslo's getter."""

    __slots__ = ('name', 'attr')

    def __init__(self, name):
        self.name = name
        self.attr = _storage_name(name)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        obj.obj_load_attr(self.name)
        try:
            return obj.__dict__[self.attr]
        except KeyError:
            raise AttributeError('%r object has no attribute %r'
                                 % (type(obj).__name__, self.name))


#: Where an object made in bulk (``bulk.Maker``) keeps the fields it was
#: made with: a frozenset shared with the objects of its template, in
#: place of a set of its own, until something reads or writes its
#: ``_changed_fields`` (:class:`_Changes`).
SHARED_CHANGES = '_changed_fields_shared'


class _Changes(object):
    """What ``_changed_fields`` finds on an object that holds no set of
    its own (a non-data descriptor: the instance's set, once it has one,
    hides it). Reading it gives the object a set of its own, the fields of
    its :data:`SHARED_CHANGES` or none, so oslo's setters and resets work
    on a plain set as ever. Invariant: an object's recorded changes are its
    own ``_changed_fields`` when it has one, else its shared frozenset,
    else none; it holds at most one of the two (the set replaces the
    frozenset)."""

    __slots__ = ()

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        stored = obj.__dict__
        changed = stored['_changed_fields'] = set(
            stored.pop(SHARED_CHANGES, ()))
        return changed


def _deleter(name):
    """oslo's deleter of field ``name``, reading the object's own dict
    (``hasattr`` of the storage name would lazy-load the field)."""
    attr = _storage_name(name)

    def deleter(self):
        if attr not in self.__dict__:
            raise AttributeError("No such attribute `%s'" % name)
        del self.__dict__[attr]
    return deleter


def _plain_setter(name, field, oslo_setter):
    """``oslo_setter`` (oslo.versionedobjects' setter of field ``name``),
    or for a string or enum field one that skips its Python layers for a
    value the field's ``coerce`` returns unchanged: an exact ``str``
    (for an enum: one of its values), or None when the field is nullable.
    Such a value is stored and recorded as changed exactly as oslo's
    setter does; any other value (an int for a string, an invalid enum
    value, None for a non-nullable field) goes to ``oslo_setter``, which
    coerces or raises. Read-only fields keep oslo's setter. The claims and
    frees of the tracker set statuses and owners this way; the tests
    compare both setters field by field.
    """
    kind = _plain_kind(field)
    if kind is None or oslo_setter is None or field.read_only:
        return oslo_setter
    valid = kind[0]
    attr = _storage_name(name)
    nullable = field.nullable

    # One test inline per kind: a setter is a hot call (no helper call).
    if valid is None:
        def setter(self, value):
            if type(value) is str or (value is None and nullable):
                self._changed_fields.add(name)
                self.__dict__[attr] = value
            else:
                oslo_setter(self, value)
    else:
        def setter(self, value):
            if (type(value) is str and value in valid) or (
                    value is None and nullable):
                self._changed_fields.add(name)
                self.__dict__[attr] = value
            else:
                oslo_setter(self, value)
    setter.oslo_setter = oslo_setter
    return setter


def _plain(field):
    """For a string or enum field: ``is_plain(value)``, true for a value
    the field's ``coerce`` returns unchanged (an exact ``str``, for an
    enum one of its values, or None when the field is nullable); None for
    any other field."""
    kind = _plain_kind(field)
    if kind is None:
        return None
    valid, nullable = kind[0], field.nullable

    def is_plain(value):
        return (type(value) is str and (valid is None or value in valid)) or (
            value is None and nullable)
    return is_plain


def _plain_kind(field):
    """``(None,)`` for a string field, ``(its values,)`` for an enum
    field (a frozenset), None for any other field."""
    kind = getattr(field, '_type', None)
    if type(kind) is ovo_fields.String:
        return (None,)
    valid = getattr(kind, 'plain_values', None)
    return None if valid is None else (valid,)


class NovaPciMdevObject(ovo_base.VersionedObject):
    OBJ_SERIAL_NAMESPACE = 'nova_object'
    OBJ_PROJECT_NAMESPACE = NAMESPACE

    #: A sync makes thousands of objects with every field changed: they
    #: share one frozenset of those names until one is touched (a set of
    #: 16 names is 728 bytes, half of what such an object holds).
    _changed_fields = _Changes()

    def stored(self, name, default=None):
        """The value field ``name`` holds, or ``default`` when it holds
        none (nothing is lazy-loaded; not a field: ``default``)."""
        return self.__dict__.get('_obj_' + name, default)

    def stored_values(self, names):
        """``tuple(self.stored(n) for n in names)``, in one C call when
        every one holds a value (``names``: a tuple, reused by callers)."""
        try:
            getter = _GETTERS[names]
        except KeyError:
            getter = _GETTERS[names] = operator.itemgetter(
                *(_storage_name(n) for n in names))
        try:
            values = getter(self.__dict__)
        except KeyError:
            return tuple(self.stored(n) for n in names)
        return values if len(names) > 1 else (values,)

    def obj_what_changed(self):
        """oslo's answer, without reading every field of the object: only
        a field whose type is an object can hold one whose own changes
        count (oslo's loop looks at nothing else), so the others are not
        read (a sync saves thousands of devices)."""
        cls = type(self)
        nested = cls.__dict__.get('_obj_nested')
        if nested is None:
            nested = tuple(name for name, field in cls.fields.items()
                           if isinstance(getattr(field, '_type', None),
                                         ovo_fields.Object))
            cls._obj_nested = nested
        stored = self.__dict__
        recorded = stored.get('_changed_fields')
        if recorded is None:        # none of its own: nothing to build
            recorded = stored.get(SHARED_CHANGES, ())
        changes = {name for name in recorded if name in cls.fields}
        for name in nested:
            value = self.stored(name)
            if (isinstance(value, ovo_base.VersionedObject)
                    and value.obj_what_changed()):
                changes.add(name)
        return changes

    def obj_reset_changes(self, fields=None, recursive=False):
        """oslo's reset; resetting all of them (a store's save) leaves an
        object that shares its changes holding none, without building the
        set of its own first."""
        if fields is None and not recursive:
            stored = self.__dict__
            stored.pop(SHARED_CHANGES, None)
            recorded = stored.get('_changed_fields')
            if recorded is not None:
                recorded.clear()
            return
        super().obj_reset_changes(fields, recursive)

    def obj_attr_is_set(self, attrname):
        """oslo's check without building the list of every field name
        on each call (it is asked for every field of every device)."""
        if attrname not in self.fields and (
                attrname not in self.obj_extra_fields):
            raise AttributeError('%s object has no attribute %r'
                                 % (self.obj_name(), attrname))
        return _storage_name(attrname) in self.__dict__

    @classmethod
    def obj_from_primitive(cls, primitive, context=None):
        key = cls._obj_primitive_key('namespace')
        if primitive.get(key) == NOVA_NAMESPACE:
            primitive = dict(primitive, **{key: NAMESPACE})
        return super().obj_from_primitive(primitive, context)


def _storage_name(name):
    """Where oslo.versionedobjects keeps field ``name`` on an object.

    Its generated property stores the coerced value in ``_obj_<name>``
    (``oslo_versionedobjects.base._get_attrname``, unchanged since the
    library began); :func:`restore` writes there. The round trip is
    checked against the public setter in ``tests/unit/objects``.
    """
    return '_obj_' + name


#: names tuple -> attrgetter of their stored values (stored_values).
_GETTERS = {}


class PersistentMixin(object):
    """The bookkeeping fields every persisted Nova object carries."""

    fields = {
        'created_at': ovo_fields.DateTimeField(nullable=True),
        'updated_at': ovo_fields.DateTimeField(nullable=True),
        'deleted_at': ovo_fields.DateTimeField(nullable=True),
        'deleted': ovo_fields.BooleanField(default=False),
    }


class ObjectListBase(ovo_base.ObjectListBase):
    pass


def obj_to_nova_primitive(obj, target_version=None):
    """Serialise ``obj`` (and nested objects) in Nova's namespace."""
    def rename(value):
        if isinstance(value, dict):
            out = {k: rename(v) for k, v in value.items()}
            key = obj._obj_primitive_key('namespace')
            if out.get(key) == NAMESPACE:
                out[key] = NOVA_NAMESPACE
            return out
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value
    return rename(obj.obj_to_primitive(target_version=target_version))


def raise_on_too_new_values(version, primitive, field, new_values):
    """Refuse to backport a value that ``version`` cannot represent."""
    value = primitive.get(field)
    if value in new_values:
        raise exception.ObjectActionError(
            action='obj_make_compatible',
            reason='%s=%s cannot be represented in version %s' % (
                field, value, version))
