"""InstancePCIRequest(s): what an instance asks of the PCI framework.

A request is ``count`` devices, each matching any one of the ``spec`` dicts
(the specs of same-name aliases are ORed). Since 1.5 a spec may carry
``mdev_type`` and a ``dev_type`` of ``mdev-pf``/``mdev-vf``; such a request
cannot be sent to a reader older than 1.5, which would match it wrongly.
"""

from oslo_serialization import jsonutils
from oslo_utils import versionutils

from nova_pci_mdev import exception
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import fields


def _asks_for_mdev(spec):
    return (spec.get('mdev_type') is not None or
            spec.get('dev_type') in fields.PciDeviceType.MDEV_TYPES)


@base.NovaPciMdevObjectRegistry.register
class InstancePCIRequest(base.NovaPciMdevObject):
    # Version 1.0: Initial version
    # Version 1.1: Added request_id field
    # Version 1.2: Added numa_policy field
    # Version 1.3: Added requester_id field
    # Version 1.4: Added 'socket' to numa_policy field
    # Version 1.5: spec may ask for mdev_type and the mdev dev_types
    VERSION = '1.5'

    FLAVOR_ALIAS = 0
    NEUTRON_PORT = 1

    fields = {
        'count': fields.IntegerField(),
        'spec': fields.ListOfDictOfNullableStringsField(),
        'alias_name': fields.StringField(nullable=True),
        'is_new': fields.BooleanField(default=False),
        'request_id': fields.UUIDField(nullable=True),
        'requester_id': fields.StringField(nullable=True),
        'numa_policy': fields.PCINUMAAffinityPolicyField(nullable=True),
    }

    @property
    def source(self):
        return (self.NEUTRON_PORT if self.alias_name is None
                else self.FLAVOR_ALIAS)

    def obj_load_attr(self, attrname):
        setattr(self, attrname, None)

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 5):
            if any(_asks_for_mdev(spec) for spec in primitive.get('spec')
                   or ()):
                raise exception.ObjectActionError(
                    action='obj_make_compatible',
                    reason='PCI request %s asks for a mediated device, '
                           'which version %s cannot represent' % (
                               primitive.get('alias_name'), target_version))
        if target < (1, 4):
            base.raise_on_too_new_values(
                target_version, primitive, 'numa_policy',
                (fields.PCINUMAAffinityPolicy.SOCKET,))
        if target < (1, 3):
            primitive.pop('requester_id', None)
        if target < (1, 2):
            primitive.pop('numa_policy', None)
        if target < (1, 1):
            primitive.pop('request_id', None)

    def to_dict(self):
        return {'count': self.count, 'spec': self.spec,
                'alias_name': self.alias_name, 'is_new': self.is_new,
                'numa_policy': self.numa_policy,
                'request_id': self.request_id,
                'requester_id': self.requester_id}


@base.NovaPciMdevObjectRegistry.register
class InstancePCIRequests(base.NovaPciMdevObject):
    # Version 1.0: Initial version
    # Version 1.1: InstancePCIRequest 1.1
    # Version 1.2: InstancePCIRequest 1.5
    VERSION = '1.2'

    fields = {
        'instance_uuid': fields.UUIDField(),
        'requests': fields.ListOfObjectsField('InstancePCIRequest'),
    }
    obj_relationships = {
        'requests': [('1.0', '1.0'), ('1.1', '1.4'), ('1.2', '1.5')],
    }

    def to_json(self):
        return jsonutils.dumps([r.to_dict() for r in self.requests])

    @classmethod
    def from_json(cls, instance_uuid, blob):
        requests = [InstancePCIRequest(**item)
                    for item in jsonutils.loads(blob or '[]')]
        return cls(instance_uuid=instance_uuid, requests=requests)
