"""Slots still to create: counted on the parent, made when claimed.

The host::

    NUMA 1
    0000:84:00.0  mdev-pf nvidia-35, creatable 3
      '- SLOT1    mdev-vf nvidia-35, mdev exists (free)

so the pools offer 4 nvidia-35 slots while the tracker holds 2 devices.
"""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import placement
from nova_pci_mdev.tests.fixtures import capacity_world
from nova_pci_mdev.tests.fixtures import tracker_world as world
from nova_pci_mdev.virt.libvirt import records as records_mod
from nova_pci_mdev.virt.libvirt import slots


class CapacityTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tracker = manager.PciDevTracker(
            world.FakeWhitelist(), world.TOPOLOGY,
            slot_factory=records_mod.SlotFactory(capacity_world.NODE))
        self.tracker.sync(capacity_world.host())
        self.tracker.pop_changes()

    def free(self):
        return world.pool_counts(self.tracker).get(
            ('10de', '1eb8', capacity_world.T.MDEV_VF, 'nvidia-35', 1), 0)

    def gpu(self):
        return self.tracker.devices[capacity_world.GPU]

    def test_counted_not_listed(self):
        self.assertEqual([capacity_world.GPU, capacity_world.SLOT1], sorted(self.tracker.devices))
        self.assertEqual(4, self.free())
        self.assertEqual(3, capacity.creatable(self.gpu()))

    def test_claim_takes_existing_first_then_makes_the_sequence(self):
        got = self.tracker.claim_instance(world.INST_A, capacity_world.vgpus(3))
        self.assertEqual([capacity_world.SLOT1, capacity_world.new(0), capacity_world.new(1)], [d.address for d in got])
        self.assertEqual([capacity_world.S.CLAIMED] * 3, [d.status for d in got])
        self.assertEqual(1, capacity.creatable(self.gpu()))
        self.assertEqual(1, self.free())
        self.assertEqual(capacity_world.S.UNCLAIMABLE, self.gpu().status)
        self.assertIs(self.gpu(), got[1].parent_device)
        self.assertIn(got[1], self.gpu().child_devices)
        changed, deleted = self.tracker.pop_changes()
        self.assertEqual({capacity_world.GPU, capacity_world.SLOT1, capacity_world.new(0), capacity_world.new(1)},
                         {d.address for d in changed})
        self.assertEqual([], deleted)
        # The made slots carry what discovery will report for them.
        self.assertEqual(
            ('10de', '1eb8', 1, capacity_world.GPU, 'nvidia-35', 'false'),
            (got[1].vendor_id, got[1].product_id, got[1].numa_node,
             got[1].parent_addr, got[1].mdev_type,
             got[1].extra_info['mdev_exists']))

    def test_failed_claim_makes_nothing(self):
        before = (sorted(self.tracker.devices), self.free(),
                  capacity.creatable(self.gpu()))
        self.assertRaises(exception.PciDeviceRequestFailed,
                          self.tracker.claim_instance, world.INST_A,
                          capacity_world.vgpus(5))
        self.assertEqual(before, (sorted(self.tracker.devices), self.free(),
                                  capacity.creatable(self.gpu())))
        self.assertEqual(([], []), self.tracker.pop_changes())

    def test_whole_parent_takes_its_slots_to_create(self):
        whole = [world.request(1, dev_type=capacity_world.T.MDEV_PF, vendor_id='10de')]
        self.tracker.claim_instance(world.INST_A, whole)
        self.assertEqual(0, self.free())
        self.assertEqual(0, capacity.usable(self.gpu()))
        self.assertEqual(3, capacity.creatable(self.gpu()))
        self.assertRaises(exception.PciDeviceRequestFailed,
                          self.tracker.claim_instance, world.INST_B,
                          capacity_world.vgpus(1))
        self.tracker.free_instance(world.INST_A)
        self.assertEqual(4, self.free())

    def test_slot_and_whole_parent_in_one_claim_exclude_each_other(self):
        both = capacity_world.vgpus(2) + [world.request(1, dev_type=capacity_world.T.MDEV_PF,
                                                        vendor_id='10de')]
        self.assertRaises(exception.PciDeviceRequestFailed,
                          self.tracker.claim_instance, world.INST_A, both)
        self.assertEqual([capacity_world.GPU, capacity_world.SLOT1], sorted(self.tracker.devices))
        self.assertEqual(4, self.free())

    def test_claim_slots_of_one_parent(self):
        got = self.tracker.claim_slots(world.INST_A, capacity_world.GPU, 2)
        self.assertEqual([capacity_world.SLOT1, capacity_world.new(0)], [d.address for d in got])
        err = self.assertRaises(exception.PciDeviceRequestFailed,
                                self.tracker.claim_slots, world.INST_B,
                                capacity_world.GPU, 3)
        self.assertIn('2 free nvidia-35 slot(s), 3 requested', str(err))
        self.assertEqual(2, self.free())
        self.assertEqual(3, len(self.tracker.devices))

    def test_sync_after_creation_keeps_identities(self):
        got = self.tracker.claim_instance(world.INST_A, capacity_world.vgpus(2))
        self.tracker.allocate_instance(world.INST_A)
        # The host now has the mdev of new(0) and one fewer to create.
        after = capacity_world.host(creatable=2) + [world.record(
            capacity_world.new(0), capacity_world.T.MDEV_VF, parent_addr=capacity_world.GPU, mdev_type='nvidia-35',
            mdev_exists='true', mdev_exposed='true', **capacity_world.GPU_IDS)]
        report = self.tracker.sync(after)
        self.assertEqual((), report.removed + report.kept + report.added)
        self.assertEqual([capacity_world.S.ALLOCATED] * 2,
                         [self.tracker.devices[d.address].status
                          for d in got])
        nxt = self.tracker.claim_instance(world.INST_B, capacity_world.vgpus(1))
        self.assertEqual([capacity_world.new(1)], [d.address for d in nxt])

    def test_provider_tree_counts_them(self):
        tree = placement.build_provider_tree(
            capacity_world.NODE, '6f1c3a52-5d0e-4c1b-9a7e-0b8f2d4c6e10',
            self.tracker.devices.values())
        (child,) = tree.children
        inv = child.inventories['VGPU']
        self.assertEqual((4, 0), (inv.total, inv.reserved))
        self.tracker.claim_instance(world.INST_A, [world.request(
            1, dev_type=capacity_world.T.MDEV_PF, vendor_id='10de')])
        tree = placement.build_provider_tree(
            capacity_world.NODE, '6f1c3a52-5d0e-4c1b-9a7e-0b8f2d4c6e10',
            self.tracker.devices.values())
        inv = tree.children[0].inventories['VGPU']
        self.assertEqual((4, 4), (inv.total, inv.reserved))

    def test_huge_count_costs_nothing(self):
        self.tracker.sync(capacity_world.host(creatable=2 ** 31))
        self.assertEqual(2 ** 31 + 1, self.free())
        self.assertEqual(2, len(self.tracker.devices))
        tree = placement.build_provider_tree(
            capacity_world.NODE, '6f1c3a52-5d0e-4c1b-9a7e-0b8f2d4c6e10',
            self.tracker.devices.values())
        self.assertEqual(placement.MAX_INT,
                         tree.children[0].inventories['VGPU'].total)

    def test_malformed_counts_read_as_none(self):
        for value in ('', '-1', 'x', '1e3', '\u0663', '9' * 20, None, 3):
            extra = {'creatable': value}
            self.assertEqual(0, capacity.creatable({'extra_info': extra}),
                             repr(value))
        self.assertEqual(7, capacity.creatable(
            {'extra_info': {'creatable': '7'}}))

    def test_without_a_slot_factory_nothing_is_offered(self):
        tracker = world.new_tracker(records=capacity_world.host())
        self.assertEqual(1, world.pool_counts(tracker).get(
            ('10de', '1eb8', capacity_world.T.MDEV_VF, 'nvidia-35', 1)))


class CreatableTagsTest(testtools.TestCase):
    """The tags of a parent's slots still to create are remembered per
    parent (pure whitelist) while the parent fields the slot prototype is
    made of stay the same."""

    def tracker(self, pure):
        tags = {capacity_world.new(0): {'color': 'red'},
                slots.slot_uuid(capacity_world.NODE, capacity_world.GPU, 'nvidia-36', 0): {
                    'color': 'blue'}}
        whitelist = world.FakeWhitelist(tags=tags, pure=pure)
        tracker = manager.PciDevTracker(
            whitelist, world.TOPOLOGY,
            slot_factory=records_mod.SlotFactory(capacity_world.NODE))
        tracker.sync(capacity_world.host())
        return tracker, whitelist

    def creatable_tags(self, tracker):
        return sorted((pool.key.mdev_type, pool.key.tags)
                      for pool in tracker.stats._pools.values()
                      if pool.creatable)

    def test_claims_and_frees_ask_a_pure_whitelist_nothing(self):
        for pure, asked in ((True, False), (False, True)):
            tracker, whitelist = self.tracker(pure)
            before = whitelist.calls
            tracker.claim_instance(world.INST_A, capacity_world.vgpus(1))   # SLOT1
            tracker.free_instance(world.INST_A)
            self.assertEqual(asked, whitelist.calls > before, pure)
            self.assertEqual([('nvidia-35', (('color', 'red'),))],
                             self.creatable_tags(tracker))

    def test_a_parent_field_change_asks_again(self):
        tracker, _ = self.tracker(pure=True)
        changed = [dict(r, mdev_type='nvidia-36') for r in capacity_world.host()]
        tracker.sync(changed)
        self.assertEqual([('nvidia-36', (('color', 'blue'),))],
                         self.creatable_tags(tracker))
        tracker.sync(capacity_world.host())
        self.assertEqual([('nvidia-35', (('color', 'red'),))],
                         self.creatable_tags(tracker))
