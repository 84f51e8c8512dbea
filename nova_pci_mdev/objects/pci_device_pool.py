"""PciDevicePool: a count of interchangeable free devices of one host.

Devices are interchangeable when they agree on vendor, product, device
type, mdev type, NUMA node and device-spec tags. ``dev_type`` travels in
``tags`` as in Nova; ``mdev_type`` is a field of its own since 1.2.
"""

import copy

from oslo_utils import versionutils

from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import fields


@base.NovaPciMdevObjectRegistry.register
class PciDevicePool(base.NovaPciMdevObject):
    # Version 1.0: Initial version
    # Version 1.1: Added numa_node field
    # Version 1.2: Added mdev_type field
    VERSION = '1.2'

    fields = {
        'product_id': fields.StringField(),
        'vendor_id': fields.StringField(),
        'numa_node': fields.IntegerField(nullable=True),
        'mdev_type': fields.MdevTypeField(nullable=True),
        'tags': fields.DictOfNullableStringsField(),
        'count': fields.IntegerField(),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 2) and 'mdev_type' in primitive:
            # Keep pools of different types apart for an older reader: the
            # type becomes a tag, which is how 1.1 distinguishes pools.
            mdev_type = primitive.pop('mdev_type')
            if mdev_type is not None:
                tags = dict(primitive.get('tags') or {})
                tags['mdev_type'] = mdev_type
                primitive['tags'] = tags
        if target < (1, 1):
            primitive.pop('numa_node', None)

    @classmethod
    def from_dict(cls, value):
        """A pool from Nova's flat dict form (unknown keys are tags)."""
        rest = copy.copy(value)
        return cls(vendor_id=rest.pop('vendor_id'),
                   product_id=rest.pop('product_id'),
                   numa_node=rest.pop('numa_node', None),
                   mdev_type=rest.pop('mdev_type', None),
                   count=rest.pop('count'),
                   tags=rest)

    def to_dict(self):
        flat = {'vendor_id': self.vendor_id, 'product_id': self.product_id,
                'numa_node': self.numa_node, 'mdev_type': self.mdev_type,
                'count': self.count}
        flat.update(self.tags)
        return flat


@base.NovaPciMdevObjectRegistry.register
class PciDevicePoolList(base.ObjectListBase, base.NovaPciMdevObject):
    # Version 1.1: PciDevicePool version 1.1 (Nova 34.0.0)
    # Version 1.2: PciDevicePool version 1.2
    VERSION = '1.2'

    fields = {
        'objects': fields.ListOfObjectsField('PciDevicePool'),
    }
    child_versions = {'1.1': '1.1', '1.2': '1.2'}
