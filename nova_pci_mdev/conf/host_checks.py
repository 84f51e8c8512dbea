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
  host offers (warning: nothing will expose it here);
* a ``[pci] device_spec`` that matches no device (warning).
"""

from nova_pci_mdev import exception
from nova_pci_mdev.conf import devices
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity

DevType = fields.PciDeviceType
_SLOT_STAND_IN = '00000000-0000-4000-8000-000000000000'


def _supported(record):
    text = (record.get('extra_info') or {}).get('supported_mdev_types', '')
    return [t for t in text.split(',') if t]


def _address_problem(settings, group, address, record, mdev_type, node):
    def problem(cls, rule):
        return cls(group=group, option='device_addresses', value=address,
                   rule=rule)

    if record is None:
        return problem(exception.ConfigWarning,
                       'no such device on host %s' % node)
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


def problems(settings, records, nodename):
    """Every problem of ``settings`` on the host of ``records``."""
    by_address = {r['address']: r for r in records}
    offered = set()
    for record in records:
        offered.update(_supported(record))
    out = []
    for mdev_type, options in settings.mdev_types.items():
        group = devices.group_name(mdev_type)
        for address in options.device_addresses:
            found = _address_problem(settings, group, address,
                                     by_address.get(address), mdev_type,
                                     nodename)
            if found is not None:
                out.append(found)
    for mdev_type in settings.enabled_mdev_types:
        if mdev_type not in offered:
            out.append(exception.ConfigWarning(
                group='devices', option='enabled_mdev_types',
                value=mdev_type, rule='no device of host %s offers this '
                                      'type' % nodename))
    for spec in settings.whitelist.unmatched(list(records) + [
            _slot_to_create(r) for r in records if capacity.creatable(r)]):
        out.append(exception.ConfigWarning(
            group='pci', option='device_spec', value=spec.source,
            rule='matches no device on host %s' % nodename))
    return out
