"""The ``GET /allocation_candidates`` query string Nova 34.0.0 builds.

Runs inside Nova's virtualenv (``benchmarks/.nova-venv``, see
:func:`benchmarks.run.ensure_nova_venv`); imports nothing of
nova-pci-mdev but the standard-library :mod:`benchmarks.placement_trees`
(for the type's resource class and trait names, which patch 0004 derives
from the mdev type). It drives Nova's own code path for a boot with PCI in
Placement on (``[filter_scheduler]pci_in_placement = True``):

1. ``nova.pci.request.get_pci_requests_from_flavor`` turns
   ``pci_passthrough:alias=vGPU:N`` into an ``InstancePCIRequest``;
2. ``RequestSpec.from_components`` calls
   ``generate_request_groups_from_pci_requests`` (one one-unit
   ``RequestGroup`` per device, ``requester_id=<request id>-<i>``);
3. ``nova.scheduler.request_filter.process_reqspec`` runs every request
   filter with default options (``compute_status_filter``,
   ``owner_nova_filter``, ...);
4. ``nova.scheduler.utils.resources_from_request_spec`` builds the
   ``ResourceRequest`` (group_policy defaulting included) and
   ``to_querystring()`` gives the query string.

Unpatched 34.0.0 derives a PCI group's resource class from the alias's
``resource_class`` or vendor/product ids and its traits from the alias's
``traits``; the series (patch 0004) derives ``CUSTOM_MDEV_<TYPE>`` and
adds ``CUSTOM_MDEV_TYPE_<TYPE>`` from the alias's ``mdev_type``. The alias
here names that class and trait explicitly, which gives the groups the
series gives an ``mdev_type`` alias. ``owner_nova_filter`` asks the
database for the minimum nova-compute version; this script answers "all
computes upgraded" by replacing that one lookup
(``request_filter._should_filter_by_owner``) for the run, as a deployment
of 34.0.0 computes would answer.

Usage: ``python -m benchmarks.placement_nova MDEV_TYPE N[,N...]``; prints
one JSON object per (N, flavor group_policy): ``n``, ``policy``
(``default``/``isolate``), ``request_id``, ``query``.
"""

import json
import sys
import warnings


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit('usage: python -m benchmarks.placement_nova '
                         'MDEV_TYPE N[,N...]')
    mdev_type, counts = argv[0], [int(n) for n in argv[1].split(',')]
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    from unittest import mock

    import nova.conf
    from nova import context as nova_context
    from nova import objects
    from nova.pci import request as pci_request
    from nova.scheduler import request_filter
    from nova.scheduler import utils

    from benchmarks import placement_trees as trees

    objects.register_all()
    conf = nova.conf.CONF
    conf([], project='nova', default_config_files=[])
    conf.set_override('pci_in_placement', True, group='filter_scheduler')
    conf.set_override('alias', [json.dumps({
        'name': 'vGPU', 'vendor_id': '10de',
        'resource_class': trees.resource_class(mdev_type),
        'traits': trees.type_trait(mdev_type)[len('CUSTOM_'):]})],
        group='pci')
    ctx = nova_context.get_admin_context()
    image = objects.ImageMeta.from_dict({'disk_format': 'qcow2',
                                         'properties': {}})
    for n in counts:
        for policy in trees.POLICIES:
            specs = {'pci_passthrough:alias': 'vGPU:%d' % n}
            if policy != 'default':
                specs['group_policy'] = policy
            flavor = objects.Flavor(
                vcpus=trees.FLAVOR['vcpus'],
                memory_mb=trees.FLAVOR['memory_mb'],
                root_gb=trees.FLAVOR['root_gb'], ephemeral_gb=0, swap=0,
                extra_specs=specs)
            pci = pci_request.get_pci_requests_from_flavor(flavor)
            spec = objects.RequestSpec.from_components(
                ctx, '6e9f3c1a-0b2d-4e5f-8a7b-9c0d1e2f3a4b', image, flavor,
                None, pci, {}, None, None)
            spec.is_bfv = False
            with mock.patch.object(request_filter, '_should_filter_by_owner',
                                   return_value=True):
                request_filter.process_reqspec(ctx, spec)
            resources = utils.resources_from_request_spec(ctx, spec, None)
            print(json.dumps({'n': n, 'policy': policy,
                              'request_id': pci.requests[0].request_id,
                              'query': resources.to_querystring()}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
