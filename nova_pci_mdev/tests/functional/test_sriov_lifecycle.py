"""The SR-IOV scenarios, written once, run for VFs and for mdev slots.

Boot, delete, whole-parent passthrough against children, host reboot and
service restart. Classes with ``scenarios`` run for each
:data:`worlds.KINDS` (the kind is in the test id:
``test_boot_one_device(vf)``, ``(mdev)``, ``(mdev-libvirt)``); the others
are about one kind only (mdev creation failures, VF hot-unplug). Hosts are
those of :func:`worlds.two_hosts` unless a class draws its own::

    host1 / host2:  cell 0: P 0000:81:00.0 + C C    cell 1: P 0000:82:00.0
                                                            + C C

Each step is followed by :meth:`verify` (owners, relatives' statuses,
kernel mdevs, store records, domains on every host) and by explicit
assertions on every host involved.
"""

import errno

import testscenarios

from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds

load_tests = testscenarios.load_tests_apply_scenarios
Status = fields.PciDeviceStatus


class BootDeleteTest(base.ScenarioTestCase):
    scenarios = worlds.SCENARIOS

    def test_boot_one_device(self):
        validated = self.cloud.validator.count
        inst = self.cloud.boot(self.kind.flavor(1))
        self.verify()
        self.assertEqual('host1', inst.host)
        (dev,) = self.assertHolds(self.host1, inst.uuid, 1)
        self.assertEqual([dev.address], list(inst.devices))
        state = self.host1.state()
        # Its parent is blocked for whole passthrough; nothing else is.
        self.assertEqual(Status.UNAVAILABLE, state[dev.parent_addr][1])
        others = {a for a, (_t, s, _i) in state.items()
                  if s != Status.AVAILABLE}
        self.assertEqual({dev.address, dev.parent_addr}, others)
        self.assertMdevsOf(self.host1, [dev])
        if self.kind.is_mdev:
            self.assertEqual([dev.address], list(self.host1.kernel_mdevs()))
        self.assertDomain(self.host1, inst, [dev])
        self.assertEqual(validated + 1, self.cloud.validator.count)
        self.assertAllFree(self.host2)
        self.assertEqual({}, self.host2.kernel_mdevs())

    def test_boot_two_devices(self):
        inst = self.cloud.boot(self.kind.flavor(2))
        self.verify()
        devs = self.assertHolds(self.host1, inst.uuid, 2)
        self.assertEqual(2, len({d.address for d in devs}))
        self.assertMdevsOf(self.host1, devs)
        self.assertDomain(self.host1, inst, devs)
        self.assertAllFree(self.host2)

    def test_boot_two_devices_on_one_numa_cell(self):
        first = self.cloud.boot(self.kind.flavor(1))
        inst = self.cloud.boot(self.kind.flavor(2, 'required', 1))
        self.verify()
        devs = self.assertHolds(self.host1, inst.uuid, 2)
        (taken,) = self.assertHolds(self.host1, first.uuid, 1)
        # Cell of ``first`` has one child left: the other cell serves.
        self.assertEqual({1 - taken.numa_node}, {d.numa_node for d in devs})
        self.assertEqual((1 - taken.numa_node,), inst.numa_cells)

    def test_boot_fails_cleanly_when_none_is_free(self):
        for _ in range(4):
            self.cloud.boot(self.kind.flavor(2))
        self.verify()
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                self.kind.flavor(1))
        self.assertIn('No valid host was found', str(exc))
        self.assertEqual(['host1', 'host2'], sorted(exc.reasons))
        for reason in exc.reasons.values():
            self.assertIn('alias %s' % self.kind.child_alias, reason)
            self.assertIn('0 free', reason)
        self.assertEqual(before, self.snapshot_all())
        self.assertEqual(4, len(self.cloud.instances))
        self.verify()

    def test_boot_of_more_than_a_host_has_changes_nothing(self):
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                self.kind.flavor(5))
        self.assertIn('5 requested', str(exc))
        self.assertEqual(before, self.snapshot_all())
        self.assertEqual({}, self.host1.kernel_mdevs())
        self.verify()

    def test_delete_frees_every_device(self):
        inst = self.cloud.boot(self.kind.flavor(2))
        devs = self.assertHolds(self.host1, inst.uuid, 2)
        self.cloud.delete(inst)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertAllFree(self.host2)
        self.assertEqual({}, self.host1.fake.domains)
        # mdevs stay for the next instance (as in Nova), which reuses them.
        self.assertMdevsOf(self.host1, devs)
        again = self.cloud.boot(self.kind.flavor(2))
        self.verify()
        self.assertEqual(sorted(d.address for d in devs),
                         sorted(again.devices))
        self.assertEqual(len(devs) if self.kind.is_mdev else 0,
                         len(self.host1.kernel_mdevs()))


class DevicelessInstanceTest(base.ScenarioTestCase):
    """An instance whose flavor asks for no device (any kind will do)."""

    kind = worlds.VF

    def test_boot_without_devices_holds_nothing(self):
        inst = self.cloud.boot({})
        self.verify()
        self.assertEqual(('host1', ()), (inst.host, inst.devices))
        self.assertEqual(set(), {s for _t, s, _i in self.host1.state(
        ).values()} - {Status.AVAILABLE})
        # compute/host.py: "an instance is recorded in the store iff it holds
        # devices".
        self.assertEqual({}, self.host1.compute.snapshot().instances)


class MdevCreationFailureTest(base.ScenarioTestCase):
    """The kernel refuses to create an mdev while a host claims: the claim
    is undone there and the scheduler tries the next host."""

    kind = worlds.MDEV

    def test_mdev_creation_failure_reschedules_and_leaves_no_trace(self):
        self.host1.tree.fail_next('create', errno.EBUSY)
        inst = self.cloud.boot(self.kind.flavor(2))
        self.verify()
        self.assertEqual('host2', inst.host)
        self.assertAllFree(self.host1)
        self.assertEqual({}, self.host1.kernel_mdevs())
        self.assertHolds(self.host2, inst.uuid, 2)

    def test_mdev_creation_failure_everywhere_is_no_valid_host(self):
        # The creation fails on each host: both claims are rolled back.
        for sim in (self.host1, self.host2):
            sim.tree.fail_next('create', errno.ENOSPC)
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                self.kind.flavor(1))
        self.assertIn('No space left on device', str(exc))
        self.assertEqual(before, self.snapshot_all())
        self.verify()


class ParentChildTest(base.ScenarioTestCase):
    """Whole-device passthrough of a parent (PF / mdev-pf) and its
    children exclude each other, as PFs and VFs do in Nova."""

    scenarios = worlds.WHOLE_SCENARIOS

    def test_whole_parent_blocks_its_children(self):
        whole = self.cloud.boot(self.kind.flavor(1, whole=True),
                                host='host1')
        self.verify()
        (parent,) = self.assertHolds(self.host1, whole.uuid, 1,
                                     self.kind.parent_type)
        devices = self.host1.devices()
        parent = devices[parent.address]
        # Its two children: VFs, or slots still to create (the whole GPU
        # lost its free mdevs), none of them usable now.
        blocked = [d.status for d in devices.values()
                   if d.dev_type == self.kind.child_type
                   and d.parent_addr == parent.address]
        blocked += [Status.UNAVAILABLE] * capacity.creatable(parent)
        self.assertEqual([Status.UNAVAILABLE] * 2, blocked)
        self.assertEqual(0, capacity.usable(parent))
        self.assertDomain(self.host1, whole, [parent])
        self.assertEqual({}, self.host1.kernel_mdevs())
        # Only the other parent's two children are left on host1.
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          self.kind.flavor(3), host='host1')
        inst = self.cloud.boot(self.kind.flavor(2), host='host1')
        devs = self.assertHolds(self.host1, inst.uuid, 2)
        self.assertNotIn(parent.address, {d.parent_addr for d in devs})
        self.verify()
        # Freeing the parent gives its children back.
        self.cloud.delete(whole)
        self.verify()
        devices = self.host1.devices()
        kids = [d.status for d in devices.values()
                if d.parent_addr == parent.address]
        self.assertEqual([Status.AVAILABLE] * len(kids), kids)
        self.assertEqual(2, len(kids) + capacity.usable(
            devices[parent.address]))

    def test_children_block_their_parent(self):
        inst = self.cloud.boot(self.kind.flavor(1), host='host1')
        (child,) = self.assertHolds(self.host1, inst.uuid, 1)
        self.assertEqual(Status.UNAVAILABLE,
                         self.host1.devices()[child.parent_addr].status)
        before = self.snapshot_all()
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          self.kind.flavor(2, whole=True), host='host1')
        self.assertEqual(before, self.snapshot_all())
        whole = self.cloud.boot(self.kind.flavor(1, whole=True),
                                host='host1')
        self.verify()
        (parent,) = self.assertHolds(self.host1, whole.uuid, 1,
                                     self.kind.parent_type)
        self.assertNotEqual(child.parent_addr, parent.address)
        # Only one child of the first parent is left on host1.
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          self.kind.flavor(2), host='host1')
        self.cloud.delete(inst)
        again = self.cloud.boot(self.kind.flavor(1, whole=True),
                                host='host1')
        self.assertHolds(self.host1, again.uuid, 1, self.kind.parent_type)
        self.verify()


class HostLifecycleTest(base.ScenarioTestCase):
    scenarios = worlds.SCENARIOS

    def test_reboot_recreates_allocated_mdevs_in_place(self):
        a = self.cloud.boot(self.kind.flavor(2))
        b = self.cloud.boot(self.kind.flavor(1))
        gone = self.cloud.boot(self.kind.flavor(1))
        self.cloud.delete(gone)
        held = sorted(a.devices + b.devices)
        before = self.host1.capacity_view()
        kernel = self.host1.kernel_mdevs()
        recreated = self.cloud.reboot_host('host1')
        self.verify()
        self.assertEqual(before, self.host1.capacity_view())
        if self.kind.is_mdev:
            self.assertEqual(held, sorted(recreated.recreated))
            self.assertEqual({}, recreated.failed)
            # Same UUID on the same parent; the freed one is not recreated.
            self.assertEqual({u: kernel[u] for u in held},
                             self.host1.kernel_mdevs())
        elif self.kind.is_vgpu_vf:
            # The held VFs get their vGPU type back; the freed one not.
            self.assertEqual(held, sorted(recreated.recreated))
            self.assertEqual({}, recreated.failed)
            self.assertEqual({a: 1150 for a in held},
                             self.host1.vgpu_types())
        else:
            self.assertEqual(([], {}), tuple(recreated))
        self.assertEqual(2, self.host1.starts)

    def test_service_restart_keeps_every_claim(self):
        a = self.cloud.boot(self.kind.flavor(2))
        self.cloud.boot(self.kind.flavor(1), host='host2')
        before = self.snapshot_all()
        for name in ('host1', 'host2'):
            self.cloud.restart_service(name)
        self.assertEqual(before, self.snapshot_all())
        self.verify()
        # The restarted hosts hand out only what is still free.
        c = self.cloud.boot(self.kind.flavor(2))
        self.assertEqual('host1', c.host)
        self.assertFalse(set(a.devices) & set(c.devices))
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          self.kind.flavor(4))
        self.verify()


class ResourcesWithoutPlacementTest(base.ScenarioTestCase):
    """``resources:VGPU=1`` on a cloud without Placement: the host picks
    the provider itself (``local_allocations``); both paths share slots."""

    scenarios = [s for s in worlds.SCENARIOS if s[1]['kind'].is_mdev]

    def test_resources_and_alias_share_the_slots(self):
        a = self.cloud.boot({'resources:VGPU': '1'})
        self.verify()
        (slot,) = self.assertHolds(self.host1, a.uuid, 1)
        self.assertEqual(worlds.PARENT_0, slot.parent_addr)
        self.assertMdevsOf(self.host1, [slot])
        self.assertEqual([{'VGPU': 1}], list(a.allocations.values()))
        self.cloud.boot(self.kind.flavor(3), host='host1')
        # host1 is full: the claim there fails and host2 serves.
        b = self.cloud.boot({'resources:VGPU': '1'})
        self.assertEqual('host2', b.host)
        self.verify()
        self.cloud.delete(a)
        c = self.cloud.boot(self.kind.flavor(1), host='host1')
        self.assertEqual([slot.address], list(c.devices))
        self.verify()


class UnplugTest(base.ScenarioTestCase):
    """A VF that leaves the host while an instance holds it is kept (and
    flagged missing) until the instance frees it; then it is gone."""

    kind = worlds.VF

    def test_unplugged_vf_is_kept_until_freed(self):
        inst = self.cloud.boot(self.kind.flavor(1))
        (vf,) = self.assertHolds(self.host1, inst.uuid, 1)
        self.host1.fake.remove_device(vf.address)
        report, _recreated = self.host1.compute.sync()
        self.assertEqual((vf.address,), report.kept)
        dev = self.host1.devices()[vf.address]
        self.assertEqual((Status.ALLOCATED, 'true'),
                         (dev.status, dev.extra_info.get('missing')))
        self.verify()
        self.cloud.delete(inst)
        self.verify()
        self.assertNotIn(vf.address, self.host1.devices())
        self.assertAllFree(self.host1)

    def test_vf_that_comes_back_is_no_longer_missing(self):
        inst = self.cloud.boot(self.kind.flavor(1), host='host1')
        (vf,) = self.assertHolds(self.host1, inst.uuid, 1)
        # The NIC resets: the PF and its VFs vanish, then come back.
        pf = vf.parent_addr
        family = [a for a, d in self.host1.devices().items()
                  if a == pf or d.parent_addr == pf]
        for address in sorted(family, reverse=True):
            self.host1.fake.remove_device(address)
        report, _recreated = self.host1.compute.sync()
        self.assertEqual((vf.address,), report.kept)
        self.kind.add_family(self.host1.fake, pf, vf.numa_node, 2)
        report, _recreated = self.host1.compute.sync()
        self.assertEqual((), report.kept)
        dev = self.host1.devices()[vf.address]
        self.assertEqual((Status.ALLOCATED, inst.uuid, None),
                         (dev.status, dev.instance_uuid,
                          dev.extra_info.get('missing')))
        self.verify()
        self.cloud.delete(inst)
        # Freed, it stays: it is on the host.
        self.assertEqual(Status.AVAILABLE,
                         self.host1.devices()[vf.address].status)
        self.assertAllFree(self.host1)
        self.verify()


class RebootRecreateFailureTest(base.CloudTestCase):
    """After a reboot the kernel keeps refusing to recreate one allocated
    mdev: its capacity must stay with its instance::

        gpu1: cell 0: T4 0000:81:00.0, nvidia-35 x3 in all, one of them an
              mdev that existed before the service (UUID 4b20d080-...,
              not one of the slot sequence's)
    """

    def test_capacity_of_an_mdev_not_recreated_is_not_handed_out(self):
        host = fake.FakeHost('gpu1', cells=1)
        host.add_mdev_parent(worlds.PARENT_0, numa_node=0,
                             types={worlds.MDEV_TYPE: 3})
        existing = '4b20d080-1b54-4048-85b3-a6a62d165c01'
        host.add_mdev(existing, worlds.PARENT_0, worlds.MDEV_TYPE)
        sim = self.cloud.add_host(host)
        a = self.cloud.boot(worlds.MDEV.flavor(1))
        self.assertEqual([existing], list(a.devices))
        sim.udev.refuse[existing] = errno.EBUSY
        recreated = self.cloud.reboot_host('gpu1')
        self.assertEqual([existing], list(recreated.failed))
        # 3 instances in all, one is a's: 2 are left for the others.
        free = sim.capacity_view()[worlds.PARENT_0 + ' free slots']
        self.assertEqual(2, free)
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          worlds.MDEV.flavor(3))
        self.cloud.boot(worlds.MDEV.flavor(2))
        # Once the kernel agrees, a gets its mdev back.
        del sim.udev.refuse[existing]
        sim.compute.sync()
        self.assertEqual((worlds.PARENT_0, worlds.MDEV_TYPE),
                         sim.kernel_mdevs().get(existing))
        self.verify()
