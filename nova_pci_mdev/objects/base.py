"""Object base classes and registry of nova-pci-mdev.

Our objects live in their own registry and namespace (``nova_pci_mdev``) so
that importing this library never touches Nova's registry. They continue
Nova's version history (``PciDevice`` 1.8 follows Nova's 1.7), so a primitive
can travel both ways: :meth:`NovaPciMdevObject.obj_from_primitive` accepts
Nova's ``nova`` namespace too, and :func:`obj_to_nova_primitive` emits it.
"""

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
    """Keeps ``nova_pci_mdev.objects.<Name>`` at the newest version."""

    def registration_hook(self, cls, index):
        from nova_pci_mdev import objects
        current = getattr(objects, cls.obj_name(), None)
        if current is None or (
                versionutils.convert_version_to_tuple(cls.VERSION) >=
                versionutils.convert_version_to_tuple(current.VERSION)):
            setattr(objects, cls.obj_name(), cls)


class NovaPciMdevObject(ovo_base.VersionedObject):
    """The base of our objects: oslo.versionedobjects' own, in the
    ``nova_pci_mdev`` namespace, reading Nova's on input."""

    OBJ_SERIAL_NAMESPACE = 'nova_object'
    OBJ_PROJECT_NAMESPACE = NAMESPACE

    def stored(self, name, default=None):
        """The value field ``name`` holds, or ``default`` when it holds
        none (nothing is lazy-loaded; not a field: ``default``)."""
        if name in self.fields and self.obj_attr_is_set(name):
            return getattr(self, name)
        return default

    def stored_values(self, names):
        """``tuple(self.stored(n) for n in names)``."""
        return tuple(self.stored(n) for n in names)

    @classmethod
    def obj_from_primitive(cls, primitive, context=None):
        key = cls.OBJ_SERIAL_NAMESPACE + '.namespace'
        if primitive.get(key) == NOVA_NAMESPACE:
            primitive = dict(primitive, **{key: NAMESPACE})
        return super().obj_from_primitive(primitive, context)


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
            key = obj.OBJ_SERIAL_NAMESPACE + '.namespace'
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
