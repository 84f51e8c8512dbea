"""The configuration against one host's devices: what only the host tells.

Pure: takes the validated :class:`~.settings.Settings` and the host's
device records (``Host.discover``, every device, whitelisted or not) and
returns problems, one per mistake, naming group, option, value and rule:

* ``[mdev_<type>] device_addresses`` naming an address the host does not
  have (warning: the group may be meant for other hosts);
* ... naming a device that has no mdev types, e.g. a VF whitelisted for
  whole passthrough (error: it can never expose the type);
* ... naming an mdev parent that does not support the type (error; a GPU
  with NVIDIA vGPU VFs is left to :mod:`~nova_pci_mdev.virt.libvirt.
  nvidia_check`: what its VFs can take changes as they are used);
* ``[devices] enabled_mdev_types`` listing a type that no device of the
  host offers (warning: nothing will expose it here), saying which node
  devices discovery left out offer it and why;
* a ``[pci] device_spec`` that matches no device (warning);
* the whitelisted mdev parents of one physical GPU (the VFs of an SR-IOV
  GPU) exposing different types or resource classes (error: Placement
  gets one provider per physical GPU, :mod:`~nova_pci_mdev.pci.
  placement`), named under the ``[mdev_<type>] device_addresses`` that
  set the odd ones apart, else ``[devices] enabled_mdev_types``;
* ``[mdev_<type>] max_instances`` read per parent, its deprecated
  nova-pci-mdev meaning, because no device_spec entry has
  ``max_instances`` for the type and the host has more of it than the
  per-host reading (Nova's) would give (warning, saying what to write).
"""

from nova_pci_mdev import exception
from nova_pci_mdev.conf import devices
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import placement

DevType = fields.PciDeviceType
_SLOT_STAND_IN = '00000000-0000-4000-8000-000000000000'
#: The type an NVIDIA vGPU VF holds (``virt.libvirt.nvidia.vf.
#: EXTRA_CURRENT``; conf does not import virt, a unit test pins both).
VGPU_CURRENT = 'vgpu_current'


def _supported(record):
    text = (record.get('extra_info') or {}).get('supported_mdev_types', '')
    return [t for t in text.split(',') if t]


def _address_problem(settings, group, address, record, mdev_type, node,
                     left_out):
    def problem(cls, rule):
        return cls(group=group, option='device_addresses', value=address,
                   rule=rule)

    if record is None:
        return problem(exception.ConfigWarning, 'no such device on host %s%s'
                       % (node, ''.join('; node device %s at this address is '
                                        'left out: %s' % (
                                            p.kwargs['device'],
                                            p.kwargs['reason'])
                                        for p in left_out.get(address, ()))))
    extra = record.get('extra_info') or {}
    if extra.get('vgpu_framework'):
        # NVIDIA vGPU VFs: what they can take changes with their siblings'
        # use; nvidia_check explains it.
        return None
    if 'supported_mdev_types' not in extra:
        whole = (' and whitelisted for whole passthrough'
                 if settings.whitelist.match(record) is not None else '')
        return problem(exception.ConfigError,
                       'is a %s device without mdev types%s on host %s: it '
                       'cannot expose mdev type %s' % (
                           record['dev_type'], whole, node, mdev_type))
    supported = _supported(record)
    if mdev_type not in supported:
        return problem(exception.ConfigError,
                       'supports %s on host %s, not %s' % (
                           ', '.join(supported) or 'no mdev type', node,
                           mdev_type))
    return None


def _slot_to_create(parent):
    """A stand-in record for the slots ``parent`` can still create (they
    are counted, not listed), so that a spec covering only them counts."""
    return dict(parent, address=_SLOT_STAND_IN, dev_type=DevType.MDEV_VF,
                parent_addr=parent['address'], dev_id=None,
                extra_info={'mdev_exists': 'false', 'mdev_exposed': 'true'})


def _left_out_parents(left_out):
    """``({address: [warning]}, {mdev type: [warning]})`` of the node
    devices discovery left out that say where they are or what they
    offer."""
    at, offering = {}, {}
    for problem in left_out:
        kwargs = getattr(problem, 'kwargs', {})
        if kwargs.get('address') and kwargs.get('mdev_types') is not None:
            at.setdefault(kwargs['address'], []).append(problem)
        for mdev_type in (kwargs.get('mdev_types') or '').split(','):
            if mdev_type:
                offering.setdefault(mdev_type, []).append(problem)
    return at, offering


def _mixed_gpu_problems(settings, records, nodename):
    """One ConfigError per physical GPU whose whitelisted mdev parents
    expose different types or classes (the provider tree refuses it)."""
    gpus = {}
    for record in records:
        if (record.get('dev_type') not in DevType.PARENT_TYPES
                or not record.get('mdev_type')
                or settings.whitelist.match(record) is None):
            continue
        rc = ((record.get('extra_info') or {}).get('resource_class')
              or placement.DEFAULT_RESOURCE_CLASS)
        gpus.setdefault(placement.physical_address(
            record['dev_type'], record['address'],
            record.get('parent_addr')), {}).setdefault(
                (record['mdev_type'], rc), []).append(record['address'])
    out = []
    for address, exposed in sorted(gpus.items()):
        reason = placement.mixed_parents_reason(exposed)
        if reason is None:
            continue
        # The type whose device_addresses lists the fewest of them.
        listed = []
        for order, ((mdev_type, _rc), members) in enumerate(
                sorted(exposed.items())):
            options = settings.mdev_types.get(mdev_type)
            named = sorted(set(members) & set(
                options.device_addresses if options else ()))
            if named:
                listed.append((len(named), order, mdev_type, named))
        rule = 'physical device %s on host %s: %s' % (
            address, nodename, reason)
        if listed:
            _n, _order, mdev_type, named = min(listed)
            out.append(exception.ConfigError(
                group=devices.group_name(mdev_type),
                option='device_addresses', value=', '.join(named),
                rule=rule))
        else:
            out.append(exception.ConfigError(
                group='devices', option='enabled_mdev_types',
                value=', '.join(sorted({t for t, _rc in exposed})),
                rule=rule))
    return out


def _slots_of(settings, records, mdev_type):
    """``(existing, offered)`` slots of ``mdev_type`` over the parents a
    device spec covers: existing mdevs (or VFs holding the type), and
    those plus the slots still to create (or free VFs taken as slots)."""
    parents = {r['address']: r for r in records
               if r.get('dev_type') in DevType.PARENT_TYPES
               and r.get('mdev_type') == mdev_type
               and settings.parent_limits(r)[0]}
    existing = offered = 0
    for record in records:
        parent = parents.get(record.get('parent_addr'))
        extra = record.get('extra_info') or {}
        if (parent is None or record.get('mdev_type') != mdev_type
                or not extra_info.is_true(extra, extra_info.MDEV_EXPOSED)):
            continue
        offered += 1
        if (record.get('dev_type') == DevType.MDEV_VF
                or extra.get(VGPU_CURRENT) == mdev_type):
            existing += 1
    return existing, offered + sum(capacity.creatable(p)
                                   for p in parents.values())


def _max_instances_warnings(settings, records, nodename):
    """``[mdev_<type>] max_instances`` read per parent (deprecated) where
    the per-host reading would give fewer slots: discovery kept the old
    reading exactly when the host offers more than ``max(existing,
    max_instances)`` (:func:`~nova_pci_mdev.virt.libvirt.slots.
    type_limits`)."""
    out = []
    for mdev_type, options in settings.mdev_types.items():
        limit = options.max_instances
        if limit is None or settings.per_host(mdev_type):
            continue
        existing, offered = _slots_of(settings, records, mdev_type)
        if offered <= max(existing, limit):
            continue
        out.append(exception.ConfigWarning(
            group=devices.group_name(mdev_type), option='max_instances',
            value=limit, rule='read per mdev parent on host %s (%d slots '
            'of %s in all), nova-pci-mdev\'s meaning so far, which is '
            'deprecated: Nova reads it per host, the limit of the '
            'Placement path (%d slots here). For a limit per parent write '
            '"max_instances": N in the [pci] device_spec entry with '
            '"mdev_type": "%s"; [%s] max_instances is then read per host' % (
                nodename, offered, mdev_type, max(existing, limit),
                mdev_type, devices.group_name(mdev_type))))
    return out


def problems(settings, records, nodename, left_out=()):
    """Every problem of ``settings`` on the host of ``records``;
    ``left_out``: discovery's warnings of the node devices it left out."""
    by_address = {r['address']: r for r in records}
    offered = set()
    for record in records:
        offered.update(_supported(record))
    left_at, left_offering = _left_out_parents(left_out)
    out = []
    for mdev_type, options in settings.mdev_types.items():
        group = devices.group_name(mdev_type)
        for address in options.device_addresses:
            found = _address_problem(settings, group, address,
                                     by_address.get(address), mdev_type,
                                     nodename, left_at)
            if found is not None:
                out.append(found)
    for mdev_type in settings.enabled_mdev_types:
        if mdev_type not in offered:
            out.append(exception.ConfigWarning(
                group='devices', option='enabled_mdev_types',
                value=mdev_type, rule='no device of host %s offers this '
                'type%s' % (nodename, ''.join(
                    '; node device %s offers it but is left out: %s' % (
                        p.kwargs['device'], p.kwargs['reason'])
                    for p in left_offering.get(mdev_type, ())))))
    for spec in settings.whitelist.unmatched(list(records) + [
            _slot_to_create(r) for r in records if capacity.creatable(r)]):
        out.append(exception.ConfigWarning(
            group='pci', option='device_spec', value=spec.source,
            rule='matches no device on host %s' % nodename))
    out.extend(_mixed_gpu_problems(settings, records, nodename))
    out.extend(_max_instances_warnings(settings, records, nodename))
    return out
