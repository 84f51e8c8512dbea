"""What a live move asks of the destination's devices, and which goes where.

Pure logic, no I/O. A running guest keeps its devices' *model* across a
live migration: the destination must give it, for each device it holds on
the source, a device of the same model:

* an mdev slot (``mdev-vf``): a slot of the same ``mdev_type`` (the
  vGPU profile is part of the guest's state);
* any other device (a VF, a PCI function, a parent passed through whole):
  the same ``dev_type``, ``vendor_id`` and ``product_id``, and a device
  whose ``[pci] device_spec`` says ``live_migratable`` (a vfio-pci variant
  driver that can migrate its state) on both hosts; a VF that carries a
  vGPU type (an NVIDIA vGPU VF) also keeps its ``mdev_type``.

:func:`destination_requests` turns the instance's PCI requests (parsed
again from its flavor on the destination) into requests pinned to those
models, one per (request, model), keeping each request's ``request_id``,
alias, NUMA policy and spec keys, so that the destination's tracker, pools
and NUMA fitting choose the devices exactly as for a boot.
:func:`pair` then maps each source device to the destination device that
replaces it.

Invariants: every function here either returns a complete answer or raises
(:class:`~nova_pci_mdev.exception.LiveMigrationRefused` for devices that
cannot move, :class:`~nova_pci_mdev.exception.InvalidValue` for a flavor
that does not match what the instance holds) before the caller changed
anything; a mapping is one-to-one and covers every source device.
"""

import dataclasses

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import instance_pci_request

DevType = fields.PciDeviceType
LIVE_MIGRATABLE = 'live_migratable'
_FIELDS = ('address', 'dev_type', 'vendor_id', 'product_id', 'mdev_type',
           'request', 'alias', 'live_migratable')
#: Devices whose mdev_type is part of what the guest runs on: mdev slots
#: and VFs that hold a vGPU type (NVIDIA's vendor-specific VFIO).
_TYPED = (DevType.MDEV_VF, DevType.SRIOV_VF)


@dataclasses.dataclass(frozen=True)
class SourceDevice:
    """One device the instance holds on the source host.

    ``request`` is the index of the PCI request (in flavor order) it
    serves and ``alias`` that request's alias; both are None for a slot
    that came through the Placement path. ``mdev_type`` is set for mdev
    slots and for VFs holding a vGPU type (None otherwise).
    ``live_migratable`` is the source's device-spec tag (``'true'``,
    ``'false'`` or None).
    """

    address: str
    dev_type: str
    vendor_id: str
    product_id: str
    mdev_type: str | None = None
    request: int | None = None
    alias: str | None = None
    live_migratable: str | None = None

    @property
    def is_mdev(self):
        return self.dev_type == DevType.MDEV_VF

    @property
    def model(self):
        """``((key, value), ...)`` the destination device must share."""
        if self.is_mdev:
            return (('dev_type', self.dev_type),
                    ('mdev_type', self.mdev_type))
        model = (('dev_type', self.dev_type), ('vendor_id', self.vendor_id),
                 ('product_id', self.product_id))
        if self.mdev_type is not None:
            model += (('mdev_type', self.mdev_type),)
        return model

    def describe(self):
        what = ('mdev %s (%s)' % (self.address, self.mdev_type)
                if self.is_mdev else '%s %s (%s:%s%s)' % (
                    self.dev_type, self.address, self.vendor_id,
                    self.product_id, '' if self.mdev_type is None
                    else ', vGPU type %s' % self.mdev_type))
        if self.alias is not None:
            what += ' of alias %s' % self.alias
        return what

    def to_dict(self):
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data, field='device'):
        if not isinstance(data, dict) or set(data) != set(_FIELDS):
            raise exception.InvalidValue(
                field=field, value=data,
                rule='expected an object with exactly the keys %s'
                     % ', '.join(_FIELDS))
        for key in _FIELDS:
            value = data[key]
            if key == 'request':
                ok = value is None or (isinstance(value, int) and
                                       not isinstance(value, bool) and
                                       value >= 0)
            else:
                ok = value is None or isinstance(value, str)
            if not ok:
                raise exception.InvalidValue(
                    field='%s.%s' % (field, key), value=value,
                    rule='expected %s or null' % (
                        'a request index' if key == 'request'
                        else 'a string'))
        if data['dev_type'] not in DevType.ALL:
            raise exception.InvalidValue(
                field=field + '.dev_type', value=data['dev_type'],
                rule='expected one of %s' % ', '.join(DevType.ALL))
        return cls(**dict(data,
                          address=names.normalize_address(data['address'])))


def source_devices(devices, record_devices, tags_of, aliases):
    """SourceDevice of each of ``devices`` (tracked PciDevices an instance
    holds), in the order of ``record_devices`` (the addresses of its store
    record, which lists them request by request).

    ``tags_of(dev)`` gives a device's spec tags, ``aliases`` the alias name
    of each request in flavor order.
    """
    by_address = {dev.address: dev for dev in devices}
    order = [a for a in record_devices if a in by_address]
    order += sorted(set(by_address) - set(order))
    index = {}
    out = []
    for address in order:
        dev = by_address[address]
        rid = dev.request_id if 'request_id' in dev else None
        request = None
        if rid is not None:
            request = index.setdefault(rid, len(index))
        mdev_type = dev.mdev_type if 'mdev_type' in dev else None
        out.append(SourceDevice(
            address=dev.address, dev_type=dev.dev_type,
            vendor_id=dev.vendor_id, product_id=dev.product_id,
            mdev_type=mdev_type if dev.dev_type in _TYPED else None,
            request=request,
            alias=(aliases[request] if request is not None and
                   request < len(aliases) else None),
            live_migratable=tags_of(dev).get(LIVE_MIGRATABLE)))
    return out


def movability_problems(sources):
    """One line per source device that cannot be live-migrated at all."""
    return ['%s is not live-migratable: its [pci] device_spec does not set '
            '"live_migratable": true (only mdevs and devices with a vfio-pci '
            'variant driver keep their state across a live migration)'
            % src.describe()
            for src in sources
            if not src.is_mdev and src.live_migratable != 'true']


@dataclasses.dataclass(frozen=True)
class Group:
    """Source devices of one (request, model): served by one pinned
    request of ``len(sources)`` devices (``request`` None: Placement)."""

    request: int | None
    model: tuple
    sources: tuple


def groups(sources):
    """Source devices grouped by (request, model), in first-seen order;
    each group's sources sorted by address."""
    out = {}
    for src in sources:
        out.setdefault((src.request, src.model), []).append(src)
    return [Group(request, model, tuple(sorted(members,
                                               key=lambda s: s.address)))
            for (request, model), members in out.items()]


def _mismatch(reason):
    return exception.InvalidValue(
        field='flavor', value='pci_passthrough:alias', rule=(
            '%s: a live move asks the destination for the devices the '
            'instance holds' % reason))


def _pinned_specs(request, group):
    model = dict(group.model)
    specs = []
    for spec in request.spec or ():
        if all(spec.get(k) in (None, v) for k, v in model.items()):
            pinned = dict(spec, **model)
            if model['dev_type'] != DevType.MDEV_VF:
                pinned[LIVE_MIGRATABLE] = 'true'
            specs.append(pinned)
    return specs


def destination_requests(requests, sources):
    """``(pinned requests, groups)`` for the destination's claim.

    ``requests``: the instance's InstancePCIRequests, in flavor order.
    The pinned requests serve the alias-path groups, in ``groups`` order
    (the Placement-path group(s), request None, come last and get no
    request). Raises InvalidValue when the requests do not match the
    devices the instance holds.
    """
    requests = list(requests or ())
    found = groups(sources)
    alias_groups = [g for g in found if g.request is not None]
    held = {}
    for group in alias_groups:
        if group.request >= len(requests):
            raise _mismatch('the instance holds devices for PCI request '
                            '#%d, the flavor has %d request(s)' % (
                                group.request + 1, len(requests)))
        held[group.request] = held.get(group.request, 0) + len(group.sources)
    pinned = []
    for group in alias_groups:
        request = requests[group.request]
        alias = group.sources[0].alias
        if alias is not None and request.alias_name != alias:
            raise _mismatch('PCI request #%d is alias %s, the instance got '
                            'its devices through alias %s' % (
                                group.request + 1, request.alias_name,
                                alias))
        specs = _pinned_specs(request, group)
        if not specs:
            raise _mismatch('no spec of alias %s asks for %s' % (
                request.alias_name, group.sources[0].describe()))
        pinned.append(instance_pci_request.InstancePCIRequest(
            count=len(group.sources), spec=specs,
            alias_name=request.alias_name, numa_policy=request.numa_policy,
            request_id=request.request_id, requester_id=None, is_new=False))
    for index, request in enumerate(requests):
        if held.get(index, 0) != request.count:
            raise _mismatch('alias %s asks for %d device(s), the instance '
                            'holds %d for it' % (request.alias_name,
                                                 request.count,
                                                 held.get(index, 0)))
    placement = [g for g in found if g.request is None]
    return pinned, alias_groups + placement


def pair(groups_, alias_devices, placement_devices):
    """``{source address: destination address}`` in source order.

    ``alias_devices``: what the pinned requests got, request by request
    (the tracker returns them so); ``placement_devices``: the slots the
    destination's Placement allocations got. A Placement slot of another
    mdev type than the source's is refused (LiveMigrationRefused).
    """
    mapping = {}
    offset = 0
    for group in groups_:
        if group.request is None:
            continue
        chosen = alias_devices[offset:offset + len(group.sources)]
        offset += len(group.sources)
        for src, dst in zip(group.sources, chosen):
            mapping[src.address] = dst.address
    by_type = {}
    for dev in placement_devices:
        by_type.setdefault(dev.mdev_type, []).append(dev)
    for group in groups_:
        if group.request is not None:
            continue
        mdev_type = dict(group.model)['mdev_type']
        chosen = by_type.pop(mdev_type, [])
        if len(chosen) != len(group.sources):
            raise exception.LiveMigrationRefused(
                what='mdevs %s' % ', '.join(s.address for s in group.sources),
                reason='the destination allocation gives %d slot(s) of %s '
                       'for %d source slot(s) of that type' % (
                           len(chosen), mdev_type, len(group.sources)))
        for src, dst in zip(group.sources, chosen):
            mapping[src.address] = dst.address
    if by_type:
        raise exception.LiveMigrationRefused(
            what='the Placement allocation', reason='it gives slots of %s, '
            'which the instance does not hold on the source' % ', '.join(
                sorted(str(t) for t in by_type)))
    return mapping
