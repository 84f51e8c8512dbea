"""An allocation never moves (issue 31): a slot in use whose mdev the host
lists under another parent keeps the parent it was claimed on.

The host::

    NUMA 0                              NUMA 1
    GPU_A 0000:3b:00.0 nvidia-222 x4    GPU_B 0000:d8:00.0 nvidia-222 x4
      '- SLOT (claimed, then allocated)

After a reboot the host lists SLOT's mdev under GPU_B (GPU_A counts the
instance free again, GPU_B one fewer): before the fix the sync took the
record as it came, and the instance's vGPU moved to another GPU on another
NUMA node without a word.
"""

import testtools

from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import pools_rebuilt
from nova_pci_mdev.tests.fixtures import tracker_world as world
from nova_pci_mdev.virt.libvirt import records as records_mod

S = world.S
T = world.T
GPU_A = '0000:3b:00.0'
GPU_B = '0000:d8:00.0'
SLOT = '0e5d8d53-6f3a-4b8e-8c3b-7f1a2d9e4c22'
INSTANCE = 'eeeeeeee-0000-4000-8000-000000000001'


def gpu(address, numa_node, creatable):
    extra = {'creatable': str(creatable)} if creatable else {}
    return world.record(address, T.MDEV_PF, vendor_id='10de',
                        product_id='1eb8', numa_node=numa_node,
                        mdev_type='nvidia-222', **extra)


def slot(parent, numa_node, mdev_type='nvidia-222'):
    return world.record(SLOT, T.MDEV_VF, vendor_id='10de',
                        product_id='1eb8', numa_node=numa_node,
                        parent_addr=parent, mdev_type=mdev_type,
                        mdev_exists='true', mdev_exposed='true')


def before_reboot():
    return [gpu(GPU_A, 0, 3), slot(GPU_A, 0), gpu(GPU_B, 1, 4)]


def after_reboot(mdev_type='nvidia-222'):
    """SLOT's mdev back under GPU_B: GPU_A has 4 free, GPU_B 3."""
    return [gpu(GPU_A, 0, 4), gpu(GPU_B, 1, 3), slot(GPU_B, 1, mdev_type)]


def new_tracker(pure):
    tracker = manager.PciDevTracker(
        world.FakeWhitelist(pure=pure), world.TOPOLOGY, (),
        slot_factory=records_mod.SlotFactory('node-1'))
    tracker.sync(before_reboot())
    tracker.claim_devices(INSTANCE, [SLOT])
    tracker.allocate_instance(INSTANCE)
    tracker.pop_changes()
    return tracker


class HeldInPlaceTest(testtools.TestCase):

    def check_held(self, tracker, report):
        dev = tracker.devices[SLOT]
        self.assertEqual((S.ALLOCATED, INSTANCE, GPU_A, 0, 'nvidia-222'),
                         (dev.status, dev.instance_uuid, dev.parent_addr,
                          dev.numa_node, dev.mdev_type))
        self.assertIs(tracker.devices[GPU_A], dev.parent_device)
        self.assertEqual([dev], tracker.devices[GPU_A].child_devices)
        self.assertEqual([], tracker.devices[GPU_B].child_devices)
        self.assertIn(SLOT, report.kept)
        self.assertTrue(device_table.is_missing(dev))
        self.assertEqual('false', dev.extra_info['mdev_exists'])
        # GPU_A keeps the instance the mdev is to be recreated in.
        self.assertEqual(3, capacity.creatable(tracker.devices[GPU_A]))
        self.assertEqual(3, capacity.creatable(tracker.devices[GPU_B]))
        self.assertEqual(S.UNAVAILABLE, tracker.devices[GPU_A].status)
        self.assertEqual(S.AVAILABLE, tracker.devices[GPU_B].status)
        self.assertEqual(pools_rebuilt.rebuilt_places(tracker),
                         pools_rebuilt.places(tracker.stats))
        self.assertEqual(3, sum(p.count for p in
                                tracker.stats.to_pool_list()
                                if p.numa_node == 0))

    def test_never_moves_to_another_parent(self):
        for pure in (False, True):
            tracker = new_tracker(pure)
            report = tracker.sync(after_reboot())
            self.check_held(tracker, report)
            self.assertEqual((GPU_B, 'nvidia-222'), device_table.listed_under(
                tracker.devices[SLOT]))
            changed, deleted = tracker.pop_changes()
            self.assertEqual(({SLOT, GPU_A, GPU_B}, []),
                             ({d.address for d in changed}, deleted))
            # Every later sync holds it the same way, changing nothing.
            for _ in range(2):
                report = tracker.sync(after_reboot())
                self.check_held(tracker, report)
                self.assertEqual(([], []), tracker.pop_changes())

    def test_never_takes_another_type(self):
        records = [gpu(GPU_A, 0, 3), slot(GPU_A, 0, 'nvidia-223'),
                   gpu(GPU_B, 1, 4)]
        tracker = new_tracker(False)
        report = tracker.sync(records)
        dev = tracker.devices[SLOT]
        self.assertEqual(('nvidia-222', GPU_A), (dev.mdev_type,
                                                 dev.parent_addr))
        self.assertIn(SLOT, report.kept)
        self.assertEqual((GPU_A, 'nvidia-223'),
                         device_table.listed_under(dev))

    def test_named_even_when_not_offered_as_listed(self):
        # An mdev of a type its parent does not expose is no slot anyone
        # may claim (the compute host's whitelist drops its record); held,
        # the sync still says where it is.
        tracker = new_tracker(False)
        tracker._whitelist.excluded = {SLOT}
        report = tracker.sync([gpu(GPU_A, 0, 3),
                               slot(GPU_A, 0, 'nvidia-223'),
                               gpu(GPU_B, 1, 4)])
        dev = tracker.devices[SLOT]
        self.assertIn(SLOT, report.kept)
        self.assertEqual((GPU_A, 'nvidia-223'),
                         device_table.listed_under(dev))
        self.assertEqual(('nvidia-222', S.ALLOCATED),
                         (dev.mdev_type, dev.status))

    def test_back_on_its_parent_or_freed(self):
        for pure in (False, True):
            tracker = new_tracker(pure)
            tracker.sync(after_reboot())
            # Recreated where it belongs: the host's counts again.
            recreated = before_reboot()
            tracker.sync(recreated)
            dev = tracker.devices[SLOT]
            self.assertFalse(device_table.is_missing(dev))
            self.assertIsNone(device_table.listed_under(dev))
            self.assertEqual('true', dev.extra_info['mdev_exists'])
            self.assertEqual(3, capacity.creatable(tracker.devices[GPU_A]))
            # Moved again, then freed: it goes, the next sync follows the
            # host (the mdev is GPU_B's free slot now).
            tracker.sync(after_reboot())
            tracker.free_instance(INSTANCE)
            self.assertNotIn(SLOT, tracker.devices)
            tracker.sync(after_reboot())
            dev = tracker.devices[SLOT]
            self.assertEqual((S.AVAILABLE, GPU_B, 1),
                             (dev.status, dev.parent_addr, dev.numa_node))
            self.assertEqual(4, capacity.creatable(tracker.devices[GPU_A]))

    def test_a_parent_without_room_stays_at_zero(self):
        tracker = new_tracker(False)
        records = after_reboot()
        records[0] = gpu(GPU_A, 0, 0)
        tracker.sync(records)
        self.assertEqual(0, capacity.creatable(tracker.devices[GPU_A]))
        tracker.sync(after_reboot())
        self.assertEqual(3, capacity.creatable(tracker.devices[GPU_A]))
