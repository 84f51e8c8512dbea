"""The planner as a pure function: pools, requests and NUMA cells in, the
picks out (as Placement's ``rp_candidates`` tests do), table-driven.

Each case builds a :class:`.planner.View` by hand from a few devices (no
stats, no tracker), plans its requests and compares what was picked; the
view is checked unchanged afterwards.

The host of every case (``T`` type-PCI / type-PF / type-VF, ``G`` an mdev
parent, ``S`` its existing mdev; ``+n`` slots still to create)::

    node 0                          node 1
    nic0  PF 8086:1572              nic1  PF 8086:1572
     `- vf0a, vf0b  VF 8086:154c     `- vf1a  VF 8086:154c
    gpu0  mdev-pf 10de:1eb8 +2      gpu1  mdev-pf 10de:1eb8 +0
     `- m0  mdev-vf (existing)       `- m1  mdev-vf (existing)
"""

import copy

import testscenarios
import testtools

from nova_pci_mdev import numa
from nova_pci_mdev import objects
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import numa_policy
from nova_pci_mdev.pci import planner
from nova_pci_mdev.pci import pools

objects.register_all()
T = fields.PciDeviceType
P = fields.PCINUMAAffinityPolicy
TOPOLOGY = numa.HostTopology(cells=(numa.HostCell(0, socket=0),
                                    numa.HostCell(1, socket=1)))


class Dev(object):
    """The little of a device the planner reads: address, links."""

    def __init__(self, address, parent=None):
        self.address = address
        self.parent_device = parent
        self.child_devices = []
        if parent is not None:
            parent.child_devices.append(self)

    def ancestors(self):
        return [] if self.parent_device is None else (
            [self.parent_device] + self.parent_device.ancestors())

    def descendants(self):
        found = []
        for child in self.child_devices:
            found += [child] + child.descendants()
        return found


#: address -> (parent, vendor, product, dev_type, mdev_type, node, place,
#: slots still to create)
HOST = {
    'nic0': (None, '8086', '1572', T.SRIOV_PF, None, 0, 'other', 0),
    'vf0a': ('nic0', '8086', '154c', T.SRIOV_VF, None, 0, 'other', 0),
    'vf0b': ('nic0', '8086', '154c', T.SRIOV_VF, None, 0, 'other', 0),
    'nic1': (None, '8086', '1572', T.SRIOV_PF, None, 1, 'other', 0),
    'vf1a': ('nic1', '8086', '154c', T.SRIOV_VF, None, 1, 'other', 0),
    'gpu0': (None, '10de', '1eb8', T.MDEV_PF, 'nvidia-35', 0, 'other', 2),
    'm0': ('gpu0', '10de', '1eb8', T.MDEV_VF, 'nvidia-35', 0, 'existing',
           0),
    'gpu1': (None, '10de', '1eb8', T.MDEV_PF, 'nvidia-35', 1, 'other', 0),
    'm1': ('gpu1', '10de', '1eb8', T.MDEV_VF, 'nvidia-35', 1, 'existing',
           0),
}


def view(busy=()):
    """The View of :data:`HOST`; ``busy``: addresses already in use."""
    devs = {}
    for address, entry in HOST.items():
        parent = devs[entry[0]] if entry[0] else None
        devs[address] = Dev(address, parent)
    by_key, where, creatable_key = {}, {}, {}
    for address, (_p, vendor, product, dev_type, mdev_type, node, place,
                  slots) in HOST.items():
        if dev_type == T.MDEV_PF:
            # A parent's slots still to create sit in its slots' pool.
            slot_key = pools.PoolKey.of(vendor, product, T.MDEV_VF,
                                        mdev_type, node, {})
            pool = by_key.setdefault(slot_key, pools.Pool(slot_key))
            if slots:
                pool.creatable[address] = [devs[address], slots]
                pool.creatable_total += slots
                creatable_key[address] = slot_key
        key = pools.PoolKey.of(vendor, product, dev_type, mdev_type, node,
                               {})
        pool = by_key.setdefault(key, pools.Pool(key))
        if address in busy:
            pool.busy.add(address)
            where[address] = pool.spots[pools.BUSY]
        else:
            getattr(pool, place)[address] = devs[address]
            where[address] = pool.spots[place]
    return planner.View(pools.Ordered(by_key), where, by_key, creatable_key)


def request(count, policy=None, **spec):
    return objects.InstancePCIRequest(count=count, spec=[spec],
                                      request_id=None, numa_policy=policy)


def picked(found):
    """The addresses a plan took, ``+parent`` for a slot to create."""
    if found is None:
        return None
    return [('+' + dev.parent.address) if isinstance(dev, pools.NewSlot)
            else dev.address for _request, dev in found.picks]


VGPU = dict(vendor_id='10de', dev_type=T.MDEV_VF)
VF = dict(vendor_id='8086', product_id='154c')


class PlanTest(testscenarios.WithScenarios, testtools.TestCase):

    scenarios = [
        ('one vf, legacy: node 0 first',
         dict(requests=[request(1, **VF)], cells=None, busy=(),
              expect=['vf0a'])),
        ('one vf required on node 1',
         dict(requests=[request(1, P.REQUIRED, **VF)], cells=[1], busy=(),
              expect=['vf1a'])),
        ('three vfs: every node',
         dict(requests=[request(3, **VF)], cells=None, busy=(),
              expect=['vf0a', 'vf0b', 'vf1a'])),
        ('four vfs: there are three',
         dict(requests=[request(4, **VF)], cells=None, busy=(),
              expect=None)),
        ('required on node 1 with its vf busy',
         dict(requests=[request(1, P.REQUIRED, **VF)], cells=[1],
              busy=('vf1a',), expect=None)),
        ('preferred on node 1 with its vf busy: node 0',
         dict(requests=[request(1, P.PREFERRED, **VF)], cells=[1],
              busy=('vf1a',), expect=['vf0a'])),
        ('a vf blocks its pf',
         dict(requests=[request(2, **VF),
                        request(2, dev_type=T.SRIOV_PF)], cells=None,
              busy=(), expect=None)),
        ('a pf whole, then the vfs of the other',
         dict(requests=[request(1, dev_type=T.SRIOV_PF),
                        request(1, **VF)], cells=None, busy=(),
              expect=['nic0', 'vf1a'])),
        ('existing mdevs before slots to create',
         dict(requests=[request(3, **VGPU)], cells=None, busy=(),
              expect=['m0', '+gpu0', '+gpu0'])),
        ('slots to create, then the other node',
         dict(requests=[request(3, **VGPU)], cells=None, busy=('m0',),
              expect=['+gpu0', '+gpu0', 'm1'])),
        ('four vgpus: there are three with m0 busy',
         dict(requests=[request(4, **VGPU)], cells=None, busy=('m0',),
              expect=None)),
        ('a parent whole takes its slots to create too',
         dict(requests=[request(1, dev_type=T.MDEV_PF, vendor_id='10de'),
                        request(2, **VGPU)], cells=None, busy=('m1',),
              expect=None)),
        ('a parent whole after its mdev is taken: the other parent',
         dict(requests=[request(1, **VGPU),
                        request(1, dev_type=T.MDEV_PF, vendor_id='10de')],
              cells=None, busy=(), expect=['m0', 'gpu1'])),
        ('no pool serves the spec',
         dict(requests=[request(1, vendor_id='abcd')], cells=None, busy=(),
              expect=None)),
    ]

    def test_plan(self):
        before = view(self.busy)
        untouched = copy.deepcopy(
            {key: (sorted(p.existing), sorted(p.other), sorted(p.busy),
                   {a: c[1] for a, c in p.creatable.items()}, p.spare)
             for key, p in before.pools.items()})
        found = planner.plan(before, self.requests, numa_policy.InstanceCells(
            TOPOLOGY, self.cells))
        self.assertEqual(self.expect, picked(found))
        self.assertEqual(untouched, {
            key: (sorted(p.existing), sorted(p.other), sorted(p.busy),
                  {a: c[1] for a, c in p.creatable.items()}, p.spare)
            for key, p in before.pools.items()})
