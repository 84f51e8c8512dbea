"""What the lean claim and free paths rely on, checked without timing.

The host is ``test_manager``'s (PCI, PF with two VFs, a GPU with two
slots, an mtty parent with one slot) and ``test_three_levels``' (a PF
above two mdev-capable VFs above their slots), and a GPU that can still
create slots (``test_capacity``).

* The family a free builds from the device's walks (``ancestors``,
  ``descendants``) is :func:`.device_table.family` of the device, same
  devices in the same order (the order of the change log and of the
  pools' refreshes).
* A claim or free walks each device's relatives a bounded number of
  times, whatever the host's size (call counts, not time).
* A free still records ``status`` as changed on a parent whose status
  stays the same (the changed fields are unchanged by the rework).
* Claims and frees refresh only the devices whose place in the pools
  changes (``manager._stale_after_claim``, the devices a free made
  available): the pools equal pools rebuilt from scratch from the same
  devices (``tests/fixtures/pools_rebuilt.py``; the property machines
  of ``test_tracker_properties`` and ``test_three_levels`` check it after
  every step).
"""

import sys

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import capacity_world
from nova_pci_mdev.tests.fixtures import opcount
from nova_pci_mdev.tests.fixtures import pools_rebuilt
from nova_pci_mdev.tests.fixtures import three_levels as three
from nova_pci_mdev.tests.fixtures import tracker_world as world
from nova_pci_mdev.virt.libvirt import records as records_mod

S = world.S
T = world.T
WALKS = (pci_device.PciDevice.ancestors.__code__,
         pci_device.PciDevice.descendants.__code__)


def walks(func, *args):
    """``(result, number of relative walks)`` of ``func(*args)``."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event == 'call' and frame.f_code in WALKS:
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = func(*args)
    finally:
        sys.setprofile(previous)
    return result, count


def slot_host(gpus):
    """``gpus`` GPUs like ``test_capacity``'s (one mdev, three to make)."""
    tracker = manager.PciDevTracker(
        world.FakeWhitelist(pure=True), world.TOPOLOGY,
        slot_factory=records_mod.SlotFactory(capacity_world.NODE))
    records = []
    for index in range(gpus):
        gpu = '0000:%02x:00.0' % (index + 1)
        for rec in capacity_world.host():
            rec = dict(rec, extra_info=dict(rec['extra_info']))
            if rec['address'] == capacity_world.GPU:
                rec['address'] = gpu
            else:
                rec['address'] = rec['address'][:-2] + '%02x' % index
                rec['parent_addr'] = gpu
            records.append(rec)
    tracker.sync(records)
    tracker.pop_changes()
    return tracker


class FamilyFromWalksTest(testtools.TestCase):

    def assert_same_families(self, tracker):
        for dev in tracker.devices.values():
            self.assertEqual(
                device_table.family([dev]),
                manager._family(dev, dev.ancestors(), dev.descendants()),
                dev.address)

    def test_two_levels(self):
        self.assert_same_families(world.new_tracker(
            records=world.world_records()))

    def test_three_levels(self):
        tracker = three.new_tracker()
        tracker.sync(three.host_records())
        self.assert_same_families(tracker)


class WalkCountTest(testtools.TestCase):

    def test_claim_and_free_walk_as_much_on_a_bigger_host(self):
        def cycle(gpus):
            """Walks of each claim (every GPU's mdev, then one slot to
            make) and of each free: (claims of mdevs, claim of a slot
            made, frees)."""
            tracker = slot_host(gpus)
            insts = ['aaaaaaaa-0000-4000-8000-%012d' % n
                     for n in range(gpus + 1)]
            claims = []
            for inst in insts:
                got, count = walks(tracker.claim_instance, inst,
                                   capacity_world.vgpus(1))
                self.assertEqual(T.MDEV_VF, got[0].dev_type)
                claims.append(count)
            frees = set()
            for inst in insts:
                freed, count = walks(tracker.free_instance, inst)
                self.assertEqual(1, len(freed))
                frees.add(count)
            return set(claims[:-1]), claims[-1], frees

        small, large = cycle(2), cycle(32)
        self.assertEqual(small, large)
        # A claim: its family, the claim's own walks, the plan's block
        # (of the parent alone for a slot to make). A free: the free's
        # own walks (the parent's status is read off its links), then
        # the tracker's, for the family whose pools it refreshes.
        self.assertEqual(({6}, 5, {4}), small)

    def test_claim_calls_stay_flat(self):
        def calls(gpus):
            tracker = slot_host(gpus)

            def claim_and_free():
                tracker.claim_instance(world.INST_A, capacity_world.vgpus(1))
                tracker.free_instance(world.INST_A)
            claim_and_free()            # the pools' memo of the spec
            return opcount.calls(claim_and_free)[1]
        small, large = calls(4), calls(64)
        self.assertLess(large, 1.05 * small, (small, large))


class HeldBelowTest(testtools.TestCase):

    def test_same_answer_as_the_walk(self):
        def by_walk(parent):
            below = {d.status for d in parent.descendants()}
            return (S.UNAVAILABLE if S.ALLOCATED in below else
                    S.UNCLAIMABLE if S.CLAIMED in below else S.AVAILABLE)

        tracker = three.new_tracker()
        tracker.sync(three.host_records())
        specs = (dict(dev_type=T.MDEV_VF), dict(dev_type=T.MDEV_VF),
                 dict(dev_type=T.MDEV_PF), dict(dev_type=T.SRIOV_VF))
        seen = set()
        for n, spec in enumerate(specs):
            inst = 'aaaaaaaa-0000-4000-8000-%012d' % n
            try:
                tracker.claim_instance(inst, [world.request(1, **spec)])
            except exception.PciDeviceRequestFailed:
                continue
            if n % 2:
                tracker.allocate_instance(inst)
            for dev in tracker.devices.values():
                answer = pci_device.held_below(dev)
                self.assertEqual(by_walk(dev), answer, dev.address)
                seen.add(answer)
        self.assertEqual({S.AVAILABLE, S.UNCLAIMABLE, S.UNAVAILABLE}, seen)


class ChangedFieldsTest(testtools.TestCase):

    def test_a_parent_that_stays_unclaimable_records_its_status(self):
        tracker = world.new_tracker(records=world.world_records())
        request = [world.request(1, mdev_type='nvidia-35',
                                 dev_type=T.MDEV_VF)]
        tracker.claim_instance(world.INST_A, request)
        tracker.claim_instance(world.INST_B, request)
        gpu = tracker.devices[world.GPU]
        self.assertEqual(S.UNCLAIMABLE, gpu.status)
        gpu.obj_reset_changes()
        tracker.pop_changes()
        tracker.free_instance(world.INST_A)
        self.assertEqual(S.UNCLAIMABLE, gpu.status)
        self.assertEqual({'status'}, gpu.obj_what_changed())
        changed, _deleted = tracker.pop_changes()
        self.assertIn(gpu, changed)


class PoolsAsRebuiltTest(testtools.TestCase):

    def assert_as_rebuilt(self, tracker):
        self.assertEqual(pools_rebuilt.rebuilt_places(tracker),
                         pools_rebuilt.places(tracker.stats))

    def test_claims_and_frees_of_slots_and_parents(self):
        tracker = slot_host(3)
        whole = [world.request(1, dev_type=T.MDEV_PF, vendor_id='10de')]
        steps = [('claim', 'a', capacity_world.vgpus(1)),
                 ('claim', 'c', whole),
                 ('claim', 'b', capacity_world.vgpus(3)),   # makes slots
                 ('claim', 'x', whole),                      # none left
                 ('free', 'a'), ('claim', 'd', capacity_world.vgpus(2)),
                 ('free', 'c'), ('claim', 'e', capacity_world.vgpus(6)),
                 ('free', 'b'), ('free', 'd'), ('free', 'e'),
                 ('claim', 'f', whole), ('free', 'f')]
        failed = []
        for step in steps:
            inst = 'aaaaaaaa-0000-4000-8000-00000000000' + step[1]
            if step[0] == 'claim':
                try:
                    tracker.claim_instance(inst, step[2])
                except exception.PciDeviceRequestFailed:
                    failed.append(step[1])
            else:
                self.assertTrue(tracker.free_instance(inst))
            self.assert_as_rebuilt(tracker)
        self.assertEqual(['x'], failed)
        self.assertEqual({S.AVAILABLE},
                         {d.status for d in tracker.devices.values()})

    def test_three_levels(self):
        tracker = three.new_tracker()
        tracker.sync(three.host_records())
        for spec in (dict(dev_type=T.SRIOV_PF), dict(dev_type=T.MDEV_PF),
                     dict(dev_type=T.MDEV_VF)):
            inst = world.INST_A
            tracker.claim_instance(inst, [world.request(1, **spec)])
            self.assert_as_rebuilt(tracker)
            tracker.allocate_instance(inst)
            self.assert_as_rebuilt(tracker)
            tracker.free_instance(inst)
            self.assert_as_rebuilt(tracker)


class SlotMakerTest(testtools.TestCase):
    """Each slot the tracker makes carries its own parent's values,
    whatever was made before."""

    def test_slots_of_different_parents(self):
        tracker = slot_host(2)
        other = dict(vendor_id='1234', product_id='5678', numa_node=0)
        records = []
        for index, ids in enumerate((capacity_world.GPU_IDS, other) * 2):
            gpu = '0000:%02x:01.0' % (index + 1)
            records.append(world.record(gpu, T.MDEV_PF,
                                        mdev_type='nvidia-35', creatable='2',
                                        **ids))
        tracker.sync(records)
        made = []
        for n in range(8):
            inst = 'aaaaaaaa-0000-4000-8000-%012d' % n
            made += tracker.claim_instance(inst, capacity_world.vgpus(1))
        self.assertEqual(8, len({d.address for d in made}))
        for slot in made:
            parent = slot.parent_device
            self.assertEqual(
                (parent.address, parent.vendor_id, parent.product_id,
                 parent.numa_node, 'false', S.CLAIMED),
                (slot.parent_addr, slot.vendor_id, slot.product_id,
                 slot.numa_node, slot.extra_info['mdev_exists'],
                 slot.status))
        self.assertEqual({'10de', '1234'}, {d.vendor_id for d in made})
