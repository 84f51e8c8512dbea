"""The provider trees the Nova series reports, and the queries Nova sends.

Pure data, standard library only (the Nova-side check,
:mod:`benchmarks.placement_nova`, compares :func:`query_params` with the
query string Nova 34.0.0 builds itself).

Trees. One compute node root provider per host (``cnNN``; inventory
VCPU/MEMORY_MB/DISK_GB as the resource tracker reports them; trait
``OWNER_NOVA``, which Nova 34.0.0 puts on its roots and asks for in
``root_required``; none of the ``HW_*``/``COMPUTE_*`` capability traits a
real root carries, which the query does not ask for). Below it, as Nova's
``pci_placement_translator`` does, one child provider per unit of the
provider model, named ``<node>_<PCI address>`` (upper case), with
inventory ``CUSTOM_MDEV_NVIDIA_<TYPE>`` (total = max_unit = the mdevs it
holds) and traits ``CUSTOM_MDEV_TYPE_NVIDIA_<TYPE>``,
``COMPUTE_MANAGED_PCI_DEVICE`` and ``OWNER_NOVA`` (patches 0004, 0008)::

    shape a (A100-like), model per-parent    model per-GPU
    cn01                                     cn01
     +- cn01_0000:41:00.1  RC:1 (VF parent)   +- cn01_0000:41:00.0  RC:16 (PF)
     +- ...   16 VFs x 8 GPUs = 128           +- ...   8
    shape b (T4-like): 4 x cn01_0000:81:00.0 RC:16, the same in both models
    shape c: 10 hosts of shape a

Invariants: provider names and UUIDs are deterministic (UUIDs are
``uuid5`` of the name), the total capacity of a host is the same in both
models, and a tree has exactly one root.
"""

import collections
import dataclasses
import urllib.parse
import uuid

ROOT_INVENTORY = {
    'VCPU': {'total': 64, 'reserved': 0, 'allocation_ratio': 4.0},
    'MEMORY_MB': {'total': 515072, 'reserved': 512, 'allocation_ratio': 1.0},
    'DISK_GB': {'total': 1800, 'reserved': 0, 'allocation_ratio': 1.0},
}
ROOT_TRAITS = ('OWNER_NOVA',)
CHILD_TRAITS = ('COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA')
#: The flavor: 1 VCPU, 512 MB, 1 GB root disk, no ephemeral, no swap.
FLAVOR = {'vcpus': 1, 'memory_mb': 512, 'root_gb': 1}
#: Nova's [scheduler]max_placement_results default, sent as ``limit``.
NOVA_LIMIT = 1000
#: What Nova 34.0.0's request filters add for every boot with default
#: options: compute_status_filter forbids COMPUTE_STATUS_DISABLED,
#: owner_nova_filter (all computes upgraded) requires OWNER_NOVA on the
#: root and in every PCI request group.
ROOT_REQUIRED = ('OWNER_NOVA',)
ROOT_FORBIDDEN = ('COMPUTE_STATUS_DISABLED',)
PCI_GROUP_EXTRA_TRAITS = ('OWNER_NOVA',)
#: A fixed request id (Nova makes a random UUID per PCI request; the
#: group suffixes are ``<request id>-<i>``).
REQUEST_ID = '3f6a1d2e-8b4c-4e5f-9a0b-1c2d3e4f5a6b'
NAMESPACE = uuid.UUID('8e0c1f4a-2b3d-4c5e-8f60-718293a4b5c6')

MODELS = ('per-parent', 'per-GPU')
POLICIES = ('default', 'isolate')


@dataclasses.dataclass(frozen=True)
class Shape:
    key: str
    title: str
    gpus: int            # physical GPUs per host
    vfs: int             # VF parents per GPU (0: the GPU is the parent)
    instances: int       # mdevs per parent
    mdev_type: str
    hosts: int
    pf_bus: int          # bus of the first GPU; GPU g on pf_bus + g

    @property
    def per_host(self):
        """mdevs a host can hold."""
        return self.gpus * max(self.vfs, 1) * self.instances

    def models(self):
        """The models that differ on this shape (without SR-IOV both
        models are one provider per GPU)."""
        return MODELS if self.vfs else ('per-GPU',)


SHAPES = collections.OrderedDict((s.key, s) for s in (
    Shape('a', '8 SR-IOV GPUs x 16 VF parents x 1 mdev (A100-like)',
          gpus=8, vfs=16, instances=1, mdev_type='nvidia-699', hosts=1,
          pf_bus=0x41),
    Shape('b', '4 GPUs x 16 mdevs (T4-like, no SR-IOV)',
          gpus=4, vfs=0, instances=16, mdev_type='nvidia-222', hosts=1,
          pf_bus=0x81),
    Shape('c', '10 hosts of shape a',
          gpus=8, vfs=16, instances=1, mdev_type='nvidia-699', hosts=10,
          pf_bus=0x41),
))


def _normalized(prefix, mdev_type):
    return prefix + ''.join(c if c.isalnum() else '_'
                            for c in mdev_type).upper()


def resource_class(mdev_type):
    """``CUSTOM_MDEV_<TYPE>`` (patch 0004: ``nvidia-699`` gives
    ``CUSTOM_MDEV_NVIDIA_699``)."""
    return _normalized('CUSTOM_MDEV_', mdev_type)


def type_trait(mdev_type):
    """``CUSTOM_MDEV_TYPE_<TYPE>`` (patch 0004)."""
    return _normalized('CUSTOM_MDEV_TYPE_', mdev_type)


def node_name(host):
    return 'cn%02d' % (host + 1)


def provider_uuid(name):
    return str(uuid.uuid5(NAMESPACE, name))


def _address(bus, offset):
    """PCI address of function ``offset`` after ``0000:<bus>:00.0``."""
    return '0000:%02X:%02X.%d' % (bus, offset // 8, offset % 8)


def _child(node, root_uuid, address, rc, total, traits):
    name = '%s_%s' % (node, address)
    return {'name': name, 'uuid': provider_uuid(name),
            'parent_provider_uuid': root_uuid,
            'inventories': {rc: {'total': total, 'reserved': 0,
                                 'min_unit': 1, 'max_unit': total,
                                 'step_size': 1, 'allocation_ratio': 1.0}},
            'traits': sorted(traits)}


def host_tree(shape, model, host):
    """The providers of one host, root first: dicts with ``name``,
    ``uuid``, ``parent_provider_uuid``, ``inventories``, ``traits``."""
    if model not in MODELS:
        raise ValueError('model must be one of %s, got %r'
                         % (', '.join(MODELS), model))
    node = node_name(host)
    root = {'name': node, 'uuid': provider_uuid(node),
            'parent_provider_uuid': None,
            'inventories': {rc: dict(inv, min_unit=1, max_unit=inv['total'],
                                     step_size=1)
                            for rc, inv in ROOT_INVENTORY.items()},
            'traits': sorted(ROOT_TRAITS)}
    rc = resource_class(shape.mdev_type)
    traits = CHILD_TRAITS + (type_trait(shape.mdev_type),)
    children = []
    for gpu in range(shape.gpus):
        bus = shape.pf_bus + gpu
        if shape.vfs and model == 'per-parent':
            # VF i of the PF is function i after it (0000:41:00.1 on)
            children.extend(
                _child(node, root['uuid'], _address(bus, vf), rc,
                       shape.instances, traits)
                for vf in range(1, shape.vfs + 1))
        else:
            children.append(_child(
                node, root['uuid'], _address(bus, 0), rc,
                shape.instances * max(shape.vfs, 1), traits))
    return [root] + children


def trees(shape, model):
    """Every provider of the shape's hosts, each root before its
    children."""
    return [p for host in range(shape.hosts)
            for p in host_tree(shape, model, host)]


def custom_names(shape):
    """(custom resource classes, custom traits) the trees use."""
    return ([resource_class(shape.mdev_type)], [type_trait(shape.mdev_type)])


def query_params(shape, n, policy, translation='groups',
                 request_id=REQUEST_ID):
    """``GET /allocation_candidates`` parameters for ``vGPU:n``, sorted.

    ``translation`` ``groups`` is what Nova 34.0.0 with the series sends
    (``RequestSpec.generate_request_groups_from_pci_requests``: one
    one-unit group per requested device, suffixed ``<request id>-<i>``,
    each also requiring the type trait and ``OWNER_NOVA``);
    ``one-group`` is the alternative of one group of ``n`` units (all
    from one provider). ``policy`` is the flavor's ``group_policy``
    extra spec: ``default`` (unset: Nova's ``resources_from_request_spec``
    sends ``none`` when there are two or more suffixed groups and no
    flavor group among them, else nothing) or ``isolate`` (sent as is).
    """
    if policy not in POLICIES:
        raise ValueError('policy must be one of %s, got %r'
                         % (', '.join(POLICIES), policy))
    if translation == 'groups':
        groups = [('%s-%d' % (request_id, i), 1) for i in range(n)]
    elif translation == 'one-group':
        groups = [('%s-0' % request_id, n)]
    else:
        raise ValueError('translation must be groups or one-group, got %r'
                         % translation)
    params = [('limit', str(NOVA_LIMIT))]
    sent = sent_policy(policy, len(groups))
    if sent:
        params.append(('group_policy', sent))
    params.append(('root_required', ','.join(
        sorted(ROOT_REQUIRED) + ['!' + t for t in sorted(ROOT_FORBIDDEN)])))
    params.append(('resources', ','.join(
        '%s:%d' % (rc, amount) for rc, amount in sorted(
            {'VCPU': FLAVOR['vcpus'], 'MEMORY_MB': FLAVOR['memory_mb'],
             'DISK_GB': FLAVOR['root_gb']}.items()))))
    rc = resource_class(shape.mdev_type)
    required = ','.join(sorted(
        (type_trait(shape.mdev_type),) + PCI_GROUP_EXTRA_TRAITS))
    for suffix, amount in groups:
        params.append(('resources' + suffix, '%s:%d' % (rc, amount)))
        params.append(('required' + suffix, required))
    return sorted(params)


def sent_policy(policy, groups):
    """The ``group_policy`` Nova sends (None: the parameter is absent)."""
    if policy == 'isolate':
        return 'isolate'
    return 'none' if groups >= 2 else None


def query_string(shape, n, policy, translation='groups',
                 request_id=REQUEST_ID):
    """The URL-encoded query string, as Nova's ``to_querystring``."""
    return urllib.parse.urlencode(
        query_params(shape, n, policy, translation, request_id))
