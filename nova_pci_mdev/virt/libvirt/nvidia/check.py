"""What ``check-config`` says about GPUs whose vGPUs are NVIDIA VFs.

Pure: from the vGPU view of the records (:func:`.nvidia.vf.apply`), the VF
states it came from and the settings, one note per GPU (what it exposes,
how many slots, what its VFs can take now and why that changes) and a
warning when the exposed type cannot be served at all. Each item is a
:class:`~nova_pci_mdev.exception.ConfigWarning` (``severity`` ``warning``)
or :class:`~nova_pci_mdev.exception.ConfigNote` (``note``) naming the
option it is about.
"""

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

_MAX_LISTED = 8


def _names(types):
    """``nvidia-1150 (NVIDIA L40S-4Q), ...`` (at most a few, then +N)."""
    shown = ['%s (%s)' % (t.mdev_type, t.name) for t in types[:_MAX_LISTED]]
    if len(types) > _MAX_LISTED:
        shown.append('+%d more' % (len(types) - _MAX_LISTED))
    return ', '.join(shown) or 'none'


def _offered(vf_states):
    """Every type some free VF lists now, by id, first name seen."""
    seen = {}
    for state in vf_states:
        for kind in state.creatable:
            seen.setdefault(kind.id, kind)
    return [seen[i] for i in sorted(seen)]


def _gpus(records, states):
    """``[(PF record, [VF records], [VfState])]`` of the vGPU GPUs."""
    by_address = {r['address']: r for r in records}
    vfs_of = {}
    for record in records:
        if record['address'] in states and record.get('parent_addr'):
            vfs_of.setdefault(record['parent_addr'], []).append(record)
    out = []
    for pf_addr in sorted(vfs_of):
        vfs = sorted(vfs_of[pf_addr], key=lambda r: r['address'])
        out.append((by_address.get(pf_addr, {'address': pf_addr}), vfs,
                    [states[r['address']] for r in vfs]))
    return out


def _exposed_note(pf, vfs, vf_states, settings):
    exposed = pf['mdev_type']
    options = settings.mdev_types.get(exposed)
    type_id = nvidia_vf.type_id_of(exposed)
    slots = [r for r in vfs if nvidia_vf.is_vgpu_slot(r)]
    holding = sum(1 for s in vf_states if s.current == type_id)
    can = sum(1 for s in vf_states if not s.current and s.can_take(type_id))
    cap = options.max_instances if options is not None else None
    text = ('NVIDIA vGPU GPU %s (%d VFs, one vGPU each) exposes %s -> %s: '
            '%d slot(s) (%d VF(s) hold it, %d free VF(s) can take it now'
            % (pf['address'], len(vfs), exposed,
               (pf.get('extra_info') or {}).get('resource_class', '-'),
               len(slots), holding, can))
    text += ('; [mdev_%s] max_instances = %d' % (exposed, cap)
             if cap is not None else
             '; sysfs does not say how many fit at once: set [mdev_%s] '
             'max_instances from NVIDIA\'s table of this GPU' % exposed)
    text += ('). Its free VFs offer now: %s; what a VF can take shrinks as '
             'its siblings get vGPUs (framebuffer, one profile size at a '
             'time) and is read again on every operation'
             % _names(_offered(vf_states)))
    items = [exception.ConfigNote(group='devices',
                                  option='enabled_mdev_types',
                                  value=exposed, rule=text)]
    if not slots:
        held = sorted({s.current_type for s in vf_states if s.current})
        items.append(exception.ConfigWarning(
            group='devices', option='enabled_mdev_types', value=exposed,
            rule='NVIDIA vGPU GPU %s cannot serve it now: no VF holds it '
                 'and no free VF can take it (VFs hold %s)'
                 % (pf['address'], ', '.join(held) or 'nothing')))
    return items


def gpu_notes(records, states, settings):
    """Notes and warnings about every GPU with NVIDIA vGPU VFs."""
    items = []
    for pf, vfs, vf_states in _gpus(records, states):
        options = settings.exposed_type(pf['address'], tuple(
            (pf.get('extra_info') or {}).get('supported_mdev_types',
                                             '').split(',')))
        if options is not None and not nvidia_vf.is_vgpu_type(
                options.mdev_type):
            items.append(exception.ConfigWarning(
                group='devices', option='enabled_mdev_types',
                value=options.mdev_type,
                rule='names NVIDIA vGPU GPU %s, whose VFs take vGPU types '
                     'named nvidia-<id> (an id from 1 to %d, no leading '
                     'zero); it is not used there'
                     % (pf['address'], nvidia_vf.MAX_TYPE_ID)))
        if pf.get('mdev_type'):
            items.extend(_exposed_note(pf, vfs, vf_states, settings))
            continue
        items.append(exception.ConfigNote(
            group='devices', option='enabled_mdev_types',
            value='(none for %s)' % pf['address'],
            rule='NVIDIA vGPU GPU %s (%d VFs) exposes no enabled type, so '
                 'its VFs are plain PCI VFs whose type nothing sets; its '
                 'free VFs offer now: %s' % (
                     pf['address'], len(vfs), _names(_offered(vf_states)))))
    return items
