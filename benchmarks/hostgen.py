"""Synthetic compute hosts for the benchmarks, shared by both sides.

One generator describes a host; three renderings of it feed the
benchmarks:

* :func:`records`: plain device dicts in the device-record format of
  ``nova_pci_mdev.virt.libvirt.records`` (what discovery returns, and what
  ``PciDevTracker.sync`` takes);
* :func:`nova_devices`: the same devices as upstream Nova's ``dev_dict``s
  (what Nova's libvirt driver reports in ``pci_passthrough_devices``).
  Nova 34.0.0 has no mdev device types, so an mdev parent becomes a
  ``type-PF`` and each of its mdev slots a ``type-VF`` child of it, at a
  made-up PCI address on the parent's bus (Nova parses every address as
  PCI);
* :func:`host_xml`: a host file for libvirt's ``test:///<file>`` driver
  with the same node devices (PCI functions and existing mdevs; the slots
  still to create are ``availableInstances``).

The host is built from repeating groups, round-robin over two NUMA nodes
(0, 1). Group ``g`` sits on PCI bus ``g + 1`` (domain ``(g + 1) >> 8``)::

    slot 0.0  GPU 10de:1eb8 (mdev parent, exposes nvidia-222)
                4 existing mdevs + 12 slots still to create    17 records
    slot 1.0  SR-IOV PF 8086:1572                                1 record
    slot 2.0-2.7  its 8 VFs 8086:154c                            8 records
    slot 3.0, 4.0  NVMe drives 144d:a808 (type-PCI)              2 records
                                              28 records, 16 node devices

``generate(n)`` stops at exactly ``n`` records (``unit='records'``) or
``n`` node devices (``unit='nodes'``, for discovery), cutting the last
group short; a GPU cut short keeps the slots emitted so far (its
``availableInstances`` is the number of slots still to create).

Invariant: :func:`records` of a host equals what ``Host.discover`` returns
for :func:`host_xml` of it with :data:`NOVA_CONF` (the discovery benchmark
checks this). ``N`` counts what Nova lists: every slot, existing or still
to create; our side has fewer records for the same host.
"""

import dataclasses
import uuid as uuid_lib
from xml.sax.saxutils import escape

from nova_pci_mdev.virt.libvirt import slots

NODENAME = 'bench-host'
GPU = ('10de', '1eb8')
PF = ('8086', '1572')
VF = ('8086', '154c')
NVME = ('144d', 'a808')
MDEV_TYPE = 'nvidia-222'
OTHER_MDEV_TYPE = 'nvidia-223'
EXISTING_PER_GPU = 4
CREATABLE_PER_GPU = 12
VFS_PER_PF = 8
NVMES_PER_GROUP = 2
NUMA_NODES = 2
SLOTS_PER_GPU = EXISTING_PER_GPU + CREATABLE_PER_GPU
RECORDS_PER_GROUP = (1 + EXISTING_PER_GPU + CREATABLE_PER_GPU +
                     1 + VFS_PER_PF + NVMES_PER_GROUP)

#: Configuration of both sides: every device of the host is whitelisted.
DEVICE_SPECS = (GPU, PF, VF, NVME)
#: The 1-device alias the scheduler and claim workloads ask for.
ALIAS_NAME = 'vGPU'
NOVA_CONF = """[pci]
%s
alias = {"name": "%s", "vendor_id": "%s", "product_id": "%s", \
"mdev_type": "%s"}

[devices]
enabled_mdev_types = %s
""" % ('\n'.join('device_spec = {"vendor_id": "%s", "product_id": "%s"}'
                 % ids for ids in DEVICE_SPECS),
       ALIAS_NAME, GPU[0], GPU[1], MDEV_TYPE, MDEV_TYPE)
#: The same configuration for Nova: its ``[pci] device_spec`` and
#: ``[pci] alias`` values (the slots are type-VFs of the GPU there).
NOVA_PCI_OPTIONS = {
    'device_spec': ['{"vendor_id": "%s", "product_id": "%s"}' % ids
                    for ids in DEVICE_SPECS],
    'alias': ['{"name": "%s", "vendor_id": "%s", "product_id": "%s", '
              '"device_type": "type-VF"}' % (ALIAS_NAME, GPU[0], GPU[1])],
}


def pci_address(domain, bus, slot, function):
    return '%04x:%02x:%02x.%x' % (domain, bus, slot, function)


def pci_node_name(address):
    return 'pci_' + address.replace(':', '_').replace('.', '_')


def mdev_node_name(mdev_uuid, parent_address):
    return 'mdev_%s_%s' % (mdev_uuid.replace('-', '_'),
                           parent_address.replace(':', '_').replace('.', '_'))


@dataclasses.dataclass
class Gpu:
    address: str
    numa_node: int
    existing: list = dataclasses.field(default_factory=list)   # UUIDs
    creatable: int = 0


@dataclasses.dataclass
class Pf:
    address: str
    numa_node: int
    vfs: list = dataclasses.field(default_factory=list)        # addresses


@dataclasses.dataclass
class Function:
    address: str
    numa_node: int


@dataclasses.dataclass
class SyntheticHost:
    """What :func:`generate` built; ``size`` counts its ``unit``."""

    size: int
    unit: str
    gpus: list = dataclasses.field(default_factory=list)
    pfs: list = dataclasses.field(default_factory=list)
    nvmes: list = dataclasses.field(default_factory=list)

    @property
    def record_count(self):
        return (sum(1 + len(g.existing) + g.creatable for g in self.gpus) +
                sum(1 + len(p.vfs) for p in self.pfs) + len(self.nvmes))

    @property
    def node_count(self):
        return (sum(1 + len(g.existing) for g in self.gpus) +
                sum(1 + len(p.vfs) for p in self.pfs) + len(self.nvmes))


def _group_items(group, existing=EXISTING_PER_GPU):
    """(cost in records, cost in nodes, action) of one group, in order;
    ``existing`` of the GPU's 16 slots are existing mdevs, the others
    still to create."""
    bus_index = group + 1
    domain, bus = bus_index >> 8, bus_index & 0xff
    node = group % NUMA_NODES

    def at(slot, function=0):
        return pci_address(domain, bus, slot, function)

    def new_gpu(host):
        host.gpus.append(Gpu(at(0), node))

    def add_mdev(index):
        def action(host):
            host.gpus[-1].existing.append(
                str(uuid_lib.UUID(int=(bus_index << 16) + index + 1)))
        return action

    def add_creatable(host):
        host.gpus[-1].creatable += 1

    def new_pf(host):
        host.pfs.append(Pf(at(1), node))

    def add_vf(index):
        def action(host):
            host.pfs[-1].vfs.append(at(2, index))
        return action

    def add_nvme(index):
        def action(host):
            host.nvmes.append(Function(at(3 + index), node))
        return action

    yield 1, 1, new_gpu
    for index in range(existing):
        yield 1, 1, add_mdev(index)
    for _ in range(EXISTING_PER_GPU + CREATABLE_PER_GPU - existing):
        yield 1, 0, add_creatable
    yield 1, 1, new_pf
    for index in range(VFS_PER_PF):
        yield 1, 1, add_vf(index)
    for index in range(NVMES_PER_GROUP):
        yield 1, 1, add_nvme(index)


def generate(n, unit='records', existing=EXISTING_PER_GPU):
    """A host with exactly ``n`` device records or node devices (as Nova
    counts them: every slot); ``existing``: how many of a GPU's slots are
    existing mdevs (:data:`SLOTS_PER_GPU`: all of them, so that our side
    holds one record for every object Nova holds)."""
    if unit not in ('records', 'nodes'):
        raise ValueError('unit must be records or nodes, got %r' % unit)
    if not isinstance(n, int) or n < 1:
        raise ValueError('n must be a positive integer, got %r' % n)
    host = SyntheticHost(size=n, unit=unit)
    count = 0
    group = 0
    while count < n:
        for records_cost, nodes_cost, action in _group_items(group,
                                                             existing):
            cost = records_cost if unit == 'records' else nodes_cost
            if count + cost > n:
                return host
            action(host)
            count += cost
        group += 1
    return host


def _label(ids):
    return 'label_%s_%s' % ids


def _record(address, ids, dev_type, numa_node, dev_id, parent_addr=None,
            mdev_type=None, extra_info=None):
    return {'address': address, 'vendor_id': ids[0], 'product_id': ids[1],
            'dev_type': dev_type, 'numa_node': numa_node,
            'parent_addr': parent_addr, 'mdev_type': mdev_type,
            'label': _label(ids), 'dev_id': dev_id,
            'extra_info': dict(extra_info or {})}


def records(host):
    """The host's device records, in discovery's order (by address, each
    mdev parent followed by its existing mdevs; its slots still to create
    are counted on it, ``extra_info['creatable']``)."""
    out = []
    for gpu in host.gpus:
        extra = {'supported_mdev_types': '%s,%s' % (MDEV_TYPE,
                                                    OTHER_MDEV_TYPE),
                 'resource_class': 'VGPU'}
        if gpu.creatable:
            extra['creatable'] = str(gpu.creatable)
        out.append(_record(
            gpu.address, GPU, 'mdev-pf', gpu.numa_node,
            pci_node_name(gpu.address), mdev_type=MDEV_TYPE,
            extra_info=extra))
        out.extend(_record(
            mdev_uuid, GPU, 'mdev-vf', gpu.numa_node,
            mdev_node_name(mdev_uuid, gpu.address), parent_addr=gpu.address,
            mdev_type=MDEV_TYPE,
            extra_info={'mdev_exists': 'true', 'mdev_exposed': 'true'})
            for mdev_uuid in sorted(gpu.existing))
    for pf in host.pfs:
        out.append(_record(pf.address, PF, 'type-PF', pf.numa_node,
                           pci_node_name(pf.address)))
        out.extend(_record(vf, VF, 'type-VF', pf.numa_node,
                           pci_node_name(vf), parent_addr=pf.address)
                   for vf in pf.vfs)
    out.extend(_record(d.address, NVME, 'type-PCI', d.numa_node,
                       pci_node_name(d.address)) for d in host.nvmes)
    # Stable: a parent keeps its slots right behind it.
    out.sort(key=lambda r: r['parent_addr'] if r['dev_type'] == 'mdev-vf'
             else r['address'])
    return out


def _slot_records(host):
    """``(GPU address, [slot UUIDs])`` of every GPU, existing mdevs first
    then the slots still to create in the order the tracker makes them:
    what Nova's side lists as the GPU's VFs."""
    return [(gpu.address, sorted(gpu.existing) + slots.new_slot_uuids(
        NODENAME, gpu.address, MDEV_TYPE, set(gpu.existing), gpu.creatable))
        for gpu in host.gpus]


def _nova_slot_address(parent_address, index):
    """The made-up PCI address of slot ``index`` of a GPU (Nova side)."""
    head, _slot_fn = parent_address.rsplit(':', 1)
    return '%s:%02x.%x' % (head, 0x10 + index // 8, index % 8)


def nova_devices(host):
    """The host's devices as Nova's libvirt driver reports them: an mdev
    parent is a ``type-PF``, every slot it has or can still create a
    ``type-VF`` of it (Nova lists each one; ours counts the creatable
    ones on the parent), in the order of :func:`records`."""
    slots_of = dict(_slot_records(host))
    out = []
    for record in records(host):
        dev = {'address': record['address'],
               'vendor_id': record['vendor_id'],
               'product_id': record['product_id'],
               'dev_type': record['dev_type'],
               'numa_node': record['numa_node'],
               'label': record['label'],
               'dev_id': record['dev_id']}
        if record['dev_type'] == 'mdev-vf':
            continue            # listed with the parent below
        if record['parent_addr']:
            dev['parent_addr'] = record['parent_addr']
        if record['dev_type'] != 'mdev-pf':
            out.append(dev)
            continue
        dev['dev_type'] = 'type-PF'
        out.append(dev)
        for index, _uuid in enumerate(slots_of[record['address']]):
            address = _nova_slot_address(record['address'], index)
            out.append(dict(dev, address=address, dev_type='type-VF',
                            dev_id=pci_node_name(address),
                            parent_addr=record['address']))
    return out


# -- libvirt test driver host file ----------------------------------------

_HEAD = """<?xml version="1.0"?>
<node>
  <cpu><nodes>%d</nodes><sockets>1</sockets><cores>4</cores>\
<threads>2</threads><active>16</active><mhz>2400</mhz>\
<model>x86_64</model></cpu>
  <memory>67108864</memory>
  <device><name>computer</name><capability type='system'>\
<product>nova-pci-mdev benchmark host</product><hardware>\
<vendor>bench</vendor><version>1</version><serial>1</serial>\
<uuid>0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9</uuid></hardware><firmware>\
<vendor>bench</vendor><version>1</version><release_date>01/01/2025\
</release_date></firmware></capability></device>
""" % NUMA_NODES


def _addr_xml(address):
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return ("<address domain='0x%s' bus='0x%s' slot='0x%s' "
            "function='0x%s'/>" % (domain, bus, slot, function))


def _pci_xml(address, ids, numa_node, class_code, inner=''):
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    return (
        "<device><name>%s</name><parent>computer</parent>"
        "<capability type='pci'><class>%s</class><domain>%d</domain>"
        "<bus>%d</bus><slot>%d</slot><function>%d</function>"
        "<product id='0x%s'/><vendor id='0x%s'/>%s"
        "<iommuGroup number='%d'>%s</iommuGroup><numa node='%d'/>"
        "</capability></device>\n" % (
            pci_node_name(address), class_code, int(domain, 16),
            int(bus, 16), int(slot, 16), int(function, 16), ids[1], ids[0],
            inner, (int(domain, 16) << 16) + (int(bus, 16) << 8) +
            (int(slot, 16) << 3) + int(function, 16), _addr_xml(address),
            numa_node))


def _types_xml(available):
    return ("<capability type='mdev_types'>" + ''.join(
        "<type id='%s'><name>%s</name><deviceAPI>vfio-pci</deviceAPI>"
        "<availableInstances>%d</availableInstances></type>"
        % (escape(type_id), escape(type_id), count)
        for type_id, count in available) + '</capability>')


def host_xml(host):
    """The host as a ``test:///`` driver file (a string)."""
    out = [_HEAD]
    for gpu in host.gpus:
        out.append(_pci_xml(gpu.address, GPU, gpu.numa_node, '0x030200',
                            _types_xml([(MDEV_TYPE, gpu.creatable),
                                        (OTHER_MDEV_TYPE, 0)])))
        for mdev_uuid in gpu.existing:
            out.append(
                "<device><name>%s</name><parent>%s</parent>"
                "<capability type='mdev'><type id='%s'/><uuid>%s</uuid>"
                "</capability></device>\n" % (
                    mdev_node_name(mdev_uuid, gpu.address),
                    pci_node_name(gpu.address), MDEV_TYPE, mdev_uuid))
    for pf in host.pfs:
        vfs = ''.join(_addr_xml(vf) for vf in pf.vfs)
        out.append(_pci_xml(
            pf.address, PF, pf.numa_node, '0x020000',
            "<capability type='virt_functions' maxCount='%d'>%s"
            "</capability>" % (VFS_PER_PF, vfs)))
        for vf in pf.vfs:
            out.append(_pci_xml(
                vf, VF, pf.numa_node, '0x020000',
                "<capability type='phys_function'>%s</capability>"
                % _addr_xml(pf.address)))
    for nvme in host.nvmes:
        out.append(_pci_xml(nvme.address, NVME, nvme.numa_node, '0x010802'))
    out.append('</node>\n')
    return ''.join(out)
