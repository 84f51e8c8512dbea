"""One provider per physical GPU on SR-IOV GPUs (issue 27), table-driven.

The host: ``GPUS`` A100-like GPUs, each a PF whose ``VFS`` VFs are mdev
parents with one instance each (three levels), on alternating NUMA
nodes, and a T4-like GPU that is its own mdev parent::

    NUMA 0                                   NUMA 1
    0000:41:00.0  type-PF 10de:20b5          0000:42:00.0  type-PF ...
      |- 0000:41:00.4  mdev-pf nvidia-699      |- 0000:42:00.4 ...
      |    (one slot still to create)          ...
      ...  (16 VF parents)
      '- 0000:41:02.3  mdev-pf nvidia-699
    ... 8 PFs: 0000:41:00.0 .. 0000:48:00.0
    0000:84:00.0  mdev-pf 10de:1eb8 nvidia-222 (T4), 4 slots to create

The devices are the real tracker's (synced from records, claimed through
it), so statuses over the three levels are the tracker's own. Expected:
8 providers of 16 named after the PFs (not 128 of one), the T4 keeping
its own provider; a PF used whole reserves all of its provider; a slot
held through the alias path reserves one unit of its PF's provider; a
local ``resources:VGPU=N`` lands on one PF's provider and takes N slots
of N of its VF parents.
"""

import testscenarios
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import placement
from nova_pci_mdev.tests.fixtures import tracker_world as world
from nova_pci_mdev.virt.libvirt import records as records_mod

S = world.S
T = world.T
NODE = 'a100-host'
ROOT = '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9'
GPUS = 8
VFS = 16
TYPE = 'nvidia-699'
T4 = '0000:84:00.0'
T4_NAME = NODE + '_dev_0000_84_00_0'
ALIAS_VM = 'aaaaaaaa-0000-4000-8000-000000000001'
PLACEMENT_VM = 'bbbbbbbb-0000-4000-8000-000000000002'
WHOLE_VM = 'cccccccc-0000-4000-8000-000000000003'


def pf(index):
    return '0000:%02x:00.0' % (0x41 + index)


def vf(index, k):
    devfn = 4 + k
    return '0000:%02x:%02x.%d' % (0x41 + index, devfn // 8, devfn % 8)


def pf_name(index):
    return '%s_pci_0000_%02x_00_0' % (NODE, 0x41 + index)


def host_records(types=None, existing=(), gpus=GPUS, t4=True):
    """Records of the host; ``types`` maps a VF address to the type it
    exposes (default TYPE); ``existing``: VF addresses with an mdev;
    ``t4``: with the T4."""
    types = types or {}
    out = []
    for i in range(gpus):
        ids = dict(vendor_id='10de', product_id='20b5', numa_node=i % 2)
        out.append(world.record(pf(i), T.SRIOV_PF, **ids))
        for k in range(VFS):
            address = vf(i, k)
            mdev_type = types.get(address, TYPE)
            if address in existing:
                out.append(world.record(
                    address, T.MDEV_PF, parent_addr=pf(i),
                    mdev_type=mdev_type, phys_function=pf(i),
                    resource_class='VGPU', **ids))
                out.append(world.record(
                    '5d2c1f40-0000-4000-8000-%012x' % (i * 100 + k),
                    T.MDEV_VF, parent_addr=address, mdev_type=mdev_type,
                    mdev_exists='true', mdev_exposed='true', **ids))
            else:
                out.append(world.record(
                    address, T.MDEV_PF, parent_addr=pf(i),
                    mdev_type=mdev_type, phys_function=pf(i),
                    resource_class='VGPU', creatable='1', **ids))
    if t4:
        out.append(world.record(T4, T.MDEV_PF, vendor_id='10de',
                                product_id='1eb8', numa_node=0,
                                mdev_type='nvidia-222',
                                resource_class='VGPU', creatable='4'))
    return out


def new_tracker(records, excluded=()):
    tracker = manager.PciDevTracker(
        world.FakeWhitelist(excluded=excluded), world.TOPOLOGY,
        slot_factory=records_mod.SlotFactory(NODE))
    tracker.sync(records)
    return tracker


def tree_of(tracker, held=(PLACEMENT_VM,)):
    return placement.build_provider_tree(
        NODE, ROOT, tracker.devices.values(), placement_held=held)


def summary(tree):
    """``{name: (rc, total, reserved, device address, parents)}``."""
    out = {}
    for prov in tree.children:
        ((rc, inv),) = prov.inventories.items()
        out[prov.name] = (rc, inv.total, inv.reserved, prov.device_address,
                          len(prov.parent_addresses))
    return out


def expected(changes=None):
    """Every provider of the untouched host, with ``changes`` applied."""
    out = {pf_name(i): ('VGPU', VFS, 0, pf(i), VFS) for i in range(GPUS)}
    out[T4_NAME] = ('VGPU', 4, 0, T4, 1)
    out.update(changes or {})
    return out


def _claim_whole(address, allocate):
    def act(tracker):
        tracker.claim_devices(WHOLE_VM, [address])
        if allocate:
            tracker.allocate_instance(WHOLE_VM)
    return act


def _slot_of(owner, parent, count=1):
    def act(tracker):
        tracker.claim_slots(owner, parent, count)
        tracker.allocate_instance(owner)
    return act


# name, records, whitelist exclusions, actions, expected providers
TREE_CASES = [
    ('8 PFs x 16 VF parents: 8 providers of 16', host_records(), (), [],
     expected()),
    ('PF not whitelisted: still one provider named after it',
     host_records(), (pf(0),), [], expected()),
    ('existing mdevs count with the slots still to create',
     host_records(existing=(vf(0, 0), vf(0, 5))), (), [], expected()),
    ('PF claimed whole: its provider all reserved', host_records(), (),
     [_claim_whole(pf(0), False)],
     expected({pf_name(0): ('VGPU', 16, 16, pf(0), VFS)})),
    ('PF allocated whole, with existing mdevs: all reserved',
     host_records(existing=(vf(1, 3),)), (), [_claim_whole(pf(1), True)],
     expected({pf_name(1): ('VGPU', 16, 16, pf(1), VFS)})),
    ('a VF parent used whole: its one slot reserved', host_records(), (),
     [_claim_whole(vf(2, 7), True)],
     expected({pf_name(2): ('VGPU', 16, 1, pf(2), VFS)})),
    ('an mdev held through the alias path: reserved 1 on the PF provider',
     host_records(), (), [_slot_of(ALIAS_VM, vf(3, 0))],
     expected({pf_name(3): ('VGPU', 16, 1, pf(3), VFS)})),
    ('an existing mdev held through the alias path: reserved 1',
     host_records(existing=(vf(3, 2),)), (), [_slot_of(ALIAS_VM, vf(3, 2))],
     expected({pf_name(3): ('VGPU', 16, 1, pf(3), VFS)})),
    ('mdevs held through Placement are not reserved', host_records(), (),
     [_slot_of(PLACEMENT_VM, vf(4, 0)), _slot_of(PLACEMENT_VM, vf(4, 1))],
     expected()),
    ('the T4 keeps its own provider and model', host_records(), (),
     [_slot_of(ALIAS_VM, T4, 2)],
     expected({T4_NAME: ('VGPU', 4, 2, T4, 1)})),
]


class SriovGpuTreeTest(testscenarios.WithScenarios, testtools.TestCase):

    scenarios = [(name, {'records': records, 'excluded': excluded,
                         'actions': actions, 'expected': want})
                 for name, records, excluded, actions, want in TREE_CASES]

    def test_providers(self):
        tracker = new_tracker(self.records, self.excluded)
        for act in self.actions:
            act(tracker)
        tree = tree_of(tracker)
        self.assertEqual(self.expected, summary(tree))
        for prov in tree.children:
            self.assertEqual(placement.provider_uuid(prov.name), prov.uuid)
            self.assertEqual(ROOT, prov.parent_uuid)
        gpu = {p.name: p for p in tree.children}[pf_name(5)]
        self.assertEqual(tuple(sorted(vf(5, k) for k in range(VFS))),
                         gpu.parent_addresses)
        self.assertEqual({'CUSTOM_MDEV_TYPE_NVIDIA_699'}, gpu.traits)
        self.assertEqual(list(gpu.parent_addresses),
                         gpu.to_dict()['parent_addresses'])


class SriovGpuRefusedTest(testtools.TestCase):

    def test_vf_parents_of_one_pf_with_two_types_are_refused(self):
        tracker = new_tracker(host_records(
            types={vf(0, 3): 'nvidia-700', vf(0, 9): 'nvidia-700'}))
        exc = self.assertRaises(exception.InvalidValue, tree_of, tracker)
        text = str(exc)
        for part in ("physical device '0000:41:00.0'",
                     'nvidia-699 (VGPU) on 14 parents: 0000:41:00.4, '
                     '0000:41:00.5, ..., 0000:41:02.3',
                     'nvidia-700 (VGPU) on 0000:41:00.7, 0000:41:01.5',
                     'one provider per physical GPU',
                     'same mdev type and resource class'):
            self.assertIn(part, text)

    def test_vf_parents_of_one_pf_with_two_classes_are_refused(self):
        records = host_records()
        for record in records:
            if record['address'] == vf(1, 0):
                record['extra_info']['resource_class'] = 'CUSTOM_A100'
        exc = self.assertRaises(exception.InvalidValue, tree_of,
                                new_tracker(records))
        self.assertIn("'0000:42:00.0'", str(exc))
        self.assertIn('nvidia-699 (CUSTOM_A100) on 0000:42:00.4', str(exc))

    def test_two_types_on_two_pfs_are_two_providers(self):
        tracker = new_tracker(host_records(
            types={vf(0, k): 'nvidia-700' for k in range(VFS)}))
        traits = {p.name: p.traits for p in tree_of(tracker).children}
        self.assertEqual({'CUSTOM_MDEV_TYPE_NVIDIA_700'}, traits[pf_name(0)])
        self.assertEqual({'CUSTOM_MDEV_TYPE_NVIDIA_699'}, traits[pf_name(1)])


def cells(*ids):
    return [numa.HostCell(id=i, socket=i) for i in ids]


class SriovGpuLocalAllocationTest(testtools.TestCase):
    """``resources:VGPU=N`` chosen locally lands on one PF's provider and
    becomes slots of N of its VF parents."""

    def claim(self, tracker, amount, numa_cells=None, consumer=PLACEMENT_VM):
        tree = tree_of(tracker)
        chosen = allocation.local_allocations(
            tree, tracker, {'': {'VGPU': amount}}, numa_cells)
        got = []
        for parent, count in allocation.slots_for(tree, tracker, chosen,
                                                  ROOT):
            got.extend(tracker.claim_slots(consumer, parent, count))
        return tree, chosen, got

    def test_vgpu_8_takes_8_vf_parents_of_one_gpu(self):
        tracker = new_tracker(host_records())
        tree, chosen, got = self.claim(tracker, 8, cells(1))
        by_uuid = tree.by_uuid()
        ((uuid, res),) = chosen.items()
        self.assertEqual((pf_name(1), {'VGPU': 8}),
                         (by_uuid[uuid].name, res))
        self.assertEqual([vf(1, k) for k in range(8)],
                         sorted(d.parent_addr for d in got))
        self.assertEqual({S.CLAIMED}, {d.status for d in got})
        # Placement's usage is the allocation: nothing reserved for it.
        self.assertEqual(('VGPU', 16, 0, pf(1), VFS),
                         summary(tree_of(tracker))[pf_name(1)])
        # Held through the alias path instead: 8 reserved.
        self.assertEqual(('VGPU', 16, 8, pf(1), VFS),
                         summary(tree_of(tracker, held=()))[pf_name(1)])

    def test_existing_free_mdevs_are_used_first(self):
        tracker = new_tracker(host_records(existing=(vf(0, 9), vf(0, 12)),
                                           t4=False))
        _tree, _chosen, got = self.claim(tracker, 3, cells(0))
        self.assertEqual([vf(0, 9), vf(0, 12), vf(0, 0)],
                         [d.parent_addr for d in got])

    def test_a_gpu_used_whole_is_passed_over(self):
        tracker = new_tracker(host_records(t4=False))
        tracker.claim_devices(WHOLE_VM, [pf(0)])
        tree, chosen, got = self.claim(tracker, 2, cells(0))
        self.assertEqual([pf_name(2)],
                         [tree.by_uuid()[u].name for u in chosen])
        self.assertEqual({pf(2)}, {tracker.devices[d.parent_addr].parent_addr
                                   for d in got})

    def test_more_than_one_gpu_has_is_refused_naming_the_providers(self):
        tracker = new_tracker(host_records(gpus=2))
        exc = self.assertRaises(exception.RequestNotSatisfiable, self.claim,
                                tracker, 17)
        self.assertIn('%s (0000:41:00.0, NUMA node 0): 16' % pf_name(0),
                      str(exc))
        self.assertEqual(set(), {d.address for d in
                                 tracker.devices.values()
                                 if d.status == S.CLAIMED})

    def test_an_allocation_beyond_the_free_slots_is_refused(self):
        tracker = new_tracker(host_records(gpus=1))
        tracker.claim_slots(ALIAS_VM, vf(0, 0), 1)
        tree = tree_of(tracker)
        exc = self.assertRaises(
            exception.RequestNotSatisfiable, allocation.slots_for, tree,
            tracker, {placement.provider_uuid(pf_name(0)): {'VGPU': 16}},
            ROOT)
        self.assertIn('15 free slot(s) of nvidia-699, 16 allocated',
                      str(exc))

    def test_only_parents_keeps_the_accepted_vf_parents(self):
        tracker = new_tracker(host_records(gpus=1))
        tree = allocation.only_parents(
            tree_of(tracker), tracker,
            lambda p: p.address in (vf(0, 1), vf(0, 2)))
        (gpu,) = tree.children
        self.assertEqual((vf(0, 1), vf(0, 2)), gpu.parent_addresses)
        self.assertEqual(2, allocation.provider_free(tracker, gpu))
