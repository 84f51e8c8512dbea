"""Text and JSON views of devices, pools and provider trees (no I/O).

Tables are aligned columns a person reads at a glance; JSON uses the
object field names (``address``, ``dev_type``, ``vendor_id``, ...) so that
scripts need no translation. Every function returns a string.
"""

import itertools
import json

from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import device_table

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus

DEVICE_KEYS = ('address', 'dev_type', 'vendor_id', 'product_id', 'mdev_type',
               'parent_addr', 'numa_node', 'status', 'instance_uuid',
               'dev_id', 'label', 'request_id')


def to_json(value):
    return json.dumps(value, indent=2, sort_keys=True)


def write_json_list(out, items, more=()):
    """Write ``to_json(list(items) + list(more)) + '\\n'`` to ``out`` item
    by item: the same text, without the whole list or the whole text in
    memory."""
    first = True
    for item in itertools.chain(items, more):
        out.write('[\n' if first else ',\n')
        first = False
        out.write(_indented(item, '  '))
    out.write('[]\n' if first else '\n]\n')


_ESCAPE = json.encoder.encode_basestring_ascii


def _indented(value, indent):
    """``to_json(value)`` as an item at ``indent``: the same text, but every
    string goes through json's C escaper and every common value is written
    directly, instead of through json's Python encoder (which ``indent=2``
    selects): several times faster for a host's ten thousand devices."""
    return indent + _text(value, indent)


def _text(value, indent):
    """:func:`_indented` without the indent of its first line."""
    kind = type(value)
    if kind is str:
        return _ESCAPE(value)
    if value is None:
        return 'null'
    if kind is bool:
        return 'true' if value else 'false'
    if kind is int:
        return int.__repr__(value)
    if kind is dict and value and all(type(k) is str for k in value):
        inner = indent + '  '
        return '{\n%s\n%s}' % (',\n'.join([
            inner + _ESCAPE(k) + ': ' + _text(value[k], inner)
            for k in sorted(value)]), indent)
    if kind in (list, tuple) and value:
        inner = indent + '  '
        return '[\n%s\n%s]' % (',\n'.join([
            inner + _text(v, inner) for v in value]), indent)
    return to_json(value).replace('\n', '\n' + indent)


def table(headers, rows):
    """Aligned columns; ``None`` shows as ``-``."""
    cells = [[('-' if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    line = '  '.join('%-*s' for _ in headers)
    out = [(line % tuple(x for pair in zip(widths, headers)
                         for x in pair)).rstrip(),
           '  '.join('-' * w for w in widths)]
    for row in cells:
        out.append((line % tuple(x for pair in zip(widths, row)
                                 for x in pair)).rstrip())
    return '\n'.join(out)


# -- devices ---------------------------------------------------------------

def device_dict(dev):
    out = dict(zip(DEVICE_KEYS, dev.stored_values(DEVICE_KEYS)))
    out['extra_info'] = dict(dev.stored('extra_info') or {})
    if (dev.dev_type == DevType.SRIOV_VF
            and out['extra_info'].get('vgpu_framework')):
        # An NVIDIA vGPU VF: what its nvidia/current_vgpu_type holds now.
        out['current_vgpu_type'] = out['extra_info'].get(
            'vgpu_current') or None
    return out


def _vgpu_state(dev):
    """`` vGPU nvidia-1150 set`` / `` vGPU type set on claim`` / ..., or
    '' for a device that is not an NVIDIA vGPU VF."""
    extra = dev.stored('extra_info') or {}
    if dev.dev_type != DevType.SRIOV_VF or not extra.get('vgpu_framework'):
        return ''
    if extra.get('vgpu_current'):
        return ' vGPU %s set' % extra['vgpu_current']
    if dev.mdev_type:
        return ' vGPU type set on claim'
    return ' no vGPU type set'


def _ids(dev):
    if dev.vendor_id or dev.product_id:
        return '%s:%s' % (dev.vendor_id, dev.product_id)
    return 'virtual'


def _owner(dev):
    if dev.instance_uuid:
        return '%s %s' % (dev.status, dev.instance_uuid)
    return dev.status


def _flags(dev, whitelisted):
    flags = []
    extra = dev.stored('extra_info') or {}
    if extra_info.is_true(extra, extra_info.MISSING):
        flags.append('MISSING from host')
    if not whitelisted and extra_info.is_false(extra,
                                               extra_info.MDEV_EXPOSED):
        # Not a slot of the type its parent exposes: an mdev left over
        # from another configuration, an NVIDIA VF that holds another
        # type, cannot take it now or is beyond max_instances.
        flags.append('not offered')
    elif not whitelisted:
        flags.append('not whitelisted')
    return (' [%s]' % ', '.join(flags)) if flags else ''


def _exists(dev):
    return extra_info.is_true(dev.extra_info, extra_info.MDEV_EXISTS)


def device_tree(devices, whitelisted=lambda dev: True):
    """:func:`device_tree_lines` as one string."""
    return '\n'.join(device_tree_lines(devices, whitelisted))


def device_tree_lines(devices, whitelisted=lambda dev: True, left_out=()):
    """NUMA node -> parent -> slots/VFs, with status and instance, line by
    line (a generator: the text is never held whole), then the node devices
    discovery left out (:func:`left_out_lines` of its warnings).

    Free slots whose mdev does not exist yet are summed up in one line per
    parent; every slot that exists or is in use has a line of its own.
    """
    by_addr = {d.address: d for d in devices}
    children = {}
    nodes = {}
    for dev in devices:
        if dev.parent_addr and dev.parent_addr in by_addr:
            children.setdefault(dev.parent_addr, []).append(dev)
        else:
            nodes.setdefault(dev.numa_node, []).append(dev)
    for node in sorted(nodes, key=lambda n: (n is None, n or 0)):
        yield 'NUMA node %s' % ('unknown' if node is None else node)
        for dev in sorted(nodes[node], key=lambda d: d.address):
            yield _root_line(dev, whitelisted)
            yield from _child_lines(
                dev, sorted(children.get(dev.address, ()),
                            key=lambda d: d.address), whitelisted)
    yield from left_out_lines(left_out)


def _root_line(dev, whitelisted):
    head = '  %-14s %-8s %-10s' % (dev.address, dev.dev_type, _ids(dev))
    if dev.dev_type == DevType.MDEV_PF or dev.mdev_type:
        rc = dev.extra_info.get(extra_info.RESOURCE_CLASS)
        head += ' %s' % (dev.mdev_type or '(no enabled type)')
        if rc:
            head += ' -> %s' % rc
    return '%s  %s%s' % (head, _owner(dev), _flags(dev, whitelisted(dev)))


def _child_lines(dev, kids, whitelisted):
    """The lines under parent ``dev``: one per child that exists or is in
    use, then the sums of the slots still to create."""
    spare = [k for k in kids if k.dev_type == DevType.MDEV_VF
             and k.status == Status.AVAILABLE and not _exists(k)]
    shown = [k for k in kids if k not in spare]
    to_create = len(spare) + capacity.usable(dev)
    blocked = capacity.creatable(dev) - capacity.usable(dev)
    lines = []
    for i, kid in enumerate(shown):
        last = i == len(shown) - 1 and not (to_create or blocked)
        what = kid.mdev_type if kid.mdev_type else _ids(kid)
        state = _vgpu_state(kid)
        if kid.dev_type == DevType.MDEV_VF:
            state = ' mdev exists' if _exists(kid) else ' mdev to create'
        lines.append('    %s %-36s %-8s %-12s %s%s%s' % (
            '`-' if last else '|-', kid.address, kid.dev_type, what,
            _owner(kid), state, _flags(kid, whitelisted(kid))))
    if to_create:
        lines.append('    %s + %d available %s slot(s), mdev created '
                     'on claim' % ('|-' if blocked else '`-',
                                   to_create, dev.mdev_type))
    if blocked:
        lines.append('    `- + %d %s slot(s) to create, not '
                     'available while the parent is used whole'
                     % (blocked, dev.mdev_type))
    return lines


# -- node devices left out -------------------------------------------------

#: The status of a node device discovery left out, in ``devices``.
LEFT_OUT = 'left out'


def _left_out(problems):
    return [p for p in problems if 'reason' in getattr(p, 'kwargs', {})]


def left_out_dicts(problems):
    """The node devices discovery left out (its NodeDeviceLeftOut
    warnings), as ``devices`` lists them in JSON: the device keys, what is
    known of each (an mdev's UUID as its address, its type and parent),
    status ``left out``, ``node_device`` and ``reason``."""
    out = []
    for problem in _left_out(problems):
        kwargs = problem.kwargs
        item = dict.fromkeys(DEVICE_KEYS)
        item.update(address=kwargs.get('address'),
                    dev_type=kwargs.get('dev_type'),
                    mdev_type=kwargs.get('mdev_type'),
                    parent_addr=kwargs.get('parent_addr'), status=LEFT_OUT,
                    dev_id=kwargs.get('device'), extra_info={},
                    whitelisted=False, node_device=kwargs.get('device'),
                    reason=kwargs.get('reason'))
        out.append(item)
    return out


def left_out_count(problems):
    """``'N node device(s) left out, '`` for the ``devices`` header, or ''
    when discovery left none out."""
    count = len(_left_out(problems))
    return '%d node device(s) left out, ' % count if count else ''


def left_out_lines(problems):
    """The table's block of the node devices discovery left out: one line
    each, naming it and why (nothing when there is none)."""
    problems = _left_out(problems)
    if problems:
        yield ('left out (listed by libvirt, not used by nova-pci-mdev; '
               'a guest may use an mdev among them)')
    for problem in problems:
        yield '  %s: %s' % (problem.kwargs.get('device'),
                            problem.kwargs.get('reason'))


# -- pools and inventory ---------------------------------------------------

def pool_dicts(pools):
    out = []
    for pool in pools:
        tags = dict(pool.tags)
        out.append({'vendor_id': pool.vendor_id,
                    'product_id': pool.product_id,
                    'dev_type': tags.pop('dev_type', None),
                    'mdev_type': pool.mdev_type,
                    'numa_node': pool.numa_node,
                    'tags': tags, 'count': pool.count})
    return out


def pool_table(pools):
    rows = []
    for p in pool_dicts(pools):
        tags = ','.join('%s=%s' % kv for kv in sorted(p['tags'].items()))
        rows.append((p['numa_node'], p['dev_type'], p['vendor_id'] or '-',
                     p['product_id'] or '-', p['mdev_type'], tags or None,
                     p['count']))
    rows.sort(key=lambda r: (r[0] is None, r[0] or 0, r[1], r[4] or ''))
    return table(('numa_node', 'dev_type', 'vendor_id', 'product_id',
                  'mdev_type', 'tags', 'count'), rows)


def inventory_dict(tree, used=None):
    """The tree; each inventory also gets ``used``: what instances hold
    through the Placement path (``used`` maps (provider uuid, rc) to it)."""
    out = tree.to_dict()
    used = used or {}
    for prov in [out['root']] + out['children']:
        for rc, inv in (prov.get('inventories') or {}).items():
            inv['used'] = used.get((prov['uuid'], rc), 0)
    return out


def _physical_device(prov):
    """The provider's device; an SR-IOV GPU's PF with how many of its VFs
    are the mdev parents the provider carries."""
    if tuple(prov.parent_addresses) in ((), (prov.device_address,)):
        return prov.device_address
    return '%s (%d mdev parents)' % (prov.device_address,
                                     len(prov.parent_addresses))


def inventory_table(tree, used=None):
    used = used or {}
    rows = []
    for prov in tree.children:
        traits = ','.join(sorted(prov.traits))
        device = _physical_device(prov)
        if not prov.inventories:
            rows.append((prov.name, device, None, 0, 0, 0, 0, traits))
        for rc, inv in sorted(prov.inventories.items()):
            held = used.get((prov.uuid, rc), 0)
            rows.append((prov.name, device, rc, inv.total,
                         inv.reserved, held,
                         max(0, inv.total - inv.reserved - held), traits))
    head = 'compute node %s (provider %s)' % (tree.root.name, tree.root.uuid)
    if not rows:
        return head + '\n(no mdev parent exposes a type: no child provider)'
    legend = ('reserved: held through the alias path or by a parent used '
              'whole; used: Placement allocations')
    return '\n'.join((head, table(
        ('provider', 'device', 'resource_class', 'total', 'reserved', 'used',
         'free', 'traits'), rows), legend))


def missing_lines(missing, devices):
    """What ``devices`` says first: a line per allocated mdev the host
    does not run (``missing``: their UUIDs), then :func:`moved_lines`."""
    for uuid in missing:
        yield ('allocated mdev %s is not on the host (after a reboot '
               '`nova-pci-mdev restore` recreates it)' % uuid)
    yield from moved_lines(devices)


def moved_lines(devices):
    """A line per slot in use among ``devices`` (the tracked ones) whose
    mdev the host lists under another parent or type (:mod:`nova_pci_mdev.
    pci.held_back`): where it is held, where it came back."""
    numa = {d.address: d.numa_node for d in devices
            if d.dev_type == DevType.MDEV_PF}

    def where(address, mdev_type):
        node = numa.get(address)
        return '%s %s (NUMA node %s)' % (
            address, mdev_type, 'unknown' if node is None else node)
    for slot in devices:
        listed = (device_table.listed_under(slot)
                  if slot.dev_type == DevType.MDEV_VF else None)
        if listed is not None:
            yield ('%s mdev %s of instance %s came back on parent %s, not '
                   'on its parent %s: not moved (an allocation keeps its '
                   'UUID on its parent); remove that mdev, then '
                   '`nova-pci-mdev restore` recreates it' % (
                       slot.status, slot.address, slot.instance_uuid,
                       where(*listed), where(slot.parent_addr,
                                             slot.mdev_type)))
