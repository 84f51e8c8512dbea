"""The SR-IOV move scenarios, written once, run for VFs and mdev slots.

Resize (to more devices, to none, on the same host; confirm and revert),
cold migration and evacuation, for each :data:`worlds.KINDS` (the kind is
in the test id: ``(vf)``, ``(mdev)``, ``(mdev-libvirt)``) on the two hosts
of :func:`worlds.two_hosts`::

    host1 / host2:  cell 0: P 0000:81:00.0 + C C    cell 1: P 0000:82:00.0
                                                            + C C

A move claims on the destination and frees on the source; each step is
followed by :meth:`verify` (owners, relatives' statuses, kernel mdevs,
store records, domains on every host that is up) and by explicit
assertions on the source and the destination.
"""

import testscenarios

from nova_pci_mdev.objects import fields
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds

load_tests = testscenarios.load_tests_apply_scenarios
Status = fields.PciDeviceStatus


class ResizeTest(base.ScenarioTestCase):
    scenarios = worlds.SCENARIOS

    def _boot_one(self):
        inst = self.cloud.boot(self.kind.flavor(1))
        (dev,) = self.assertHolds(self.host1, inst.uuid, 1)
        return inst, dev

    def test_resize_to_more_devices_then_confirm(self):
        inst, old = self._boot_one()
        mig = self.cloud.resize(inst, self.kind.flavor(2))
        self.verify()
        self.assertEqual('host2', mig.dest)
        self.assertEqual(cloud_mod.VERIFY_RESIZE, inst.status)
        self.assertHolds(self.host1, inst.uuid, 1)
        new = self.assertHolds(self.host2, mig.uuid, 2)
        self.assertMdevsOf(self.host2, new)
        self.assertDomain(self.host2, inst, new)
        self.cloud.confirm_resize(inst)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertEqual({}, self.host1.fake.domains)
        self.assertHolds(self.host2, inst.uuid, 2)
        self.assertDomain(self.host2, inst, new)
        self.assertEqual(('host2', cloud_mod.ACTIVE),
                         (inst.host, inst.status))
        self.assertEqual(sorted(d.address for d in new),
                         sorted(inst.devices))

    def test_resize_to_more_devices_then_revert(self):
        inst, old = self._boot_one()
        mig = self.cloud.resize(inst, self.kind.flavor(2))
        self.assertHolds(self.host2, mig.uuid, 2)
        self.cloud.revert_resize(inst)
        self.verify()
        self.assertAllFree(self.host2)
        self.assertEqual({}, self.host2.fake.domains)
        (dev,) = self.assertHolds(self.host1, inst.uuid, 1)
        self.assertEqual(old.address, dev.address)
        self.assertDomain(self.host1, inst, [dev])
        self.assertEqual(('host1', cloud_mod.ACTIVE),
                         (inst.host, inst.status))

    def test_resize_to_no_device_then_confirm(self):
        inst, old = self._boot_one()
        mig = self.cloud.resize(inst, {})
        self.verify()
        self.assertEqual([], self.host2.held().get(mig.uuid, []))
        self.assertHolds(self.host1, inst.uuid, 1)
        self.cloud.confirm_resize(inst)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertEqual(('host2', ()), (inst.host, inst.devices))
        self.assertEqual({}, self.host2.held())
        self.assertDomain(self.host2, inst, [])

    def test_resize_to_no_device_then_revert(self):
        inst, old = self._boot_one()
        self.cloud.resize(inst, {})
        self.cloud.revert_resize(inst)
        self.verify()
        self.assertAllFree(self.host2)
        self.assertHolds(self.host1, inst.uuid, 1)

    def test_resize_on_the_same_host_then_confirm(self):
        inst, old = self._boot_one()
        mig = self.cloud.resize(inst, self.kind.flavor(2), host='host1')
        self.verify()
        self.assertHolds(self.host1, inst.uuid, 1)
        new = self.assertHolds(self.host1, mig.uuid, 2)
        self.assertNotIn(old.address, [d.address for d in new])
        self.cloud.confirm_resize(inst)
        self.verify()
        held = self.assertHolds(self.host1, inst.uuid, 2)
        self.assertEqual(sorted(d.address for d in new),
                         sorted(d.address for d in held))
        self.assertEqual(Status.AVAILABLE,
                         self.host1.devices()[old.address].status)
        self.assertAllFree(self.host2)

    def test_resize_on_the_same_host_then_revert(self):
        inst, old = self._boot_one()
        self.cloud.resize(inst, self.kind.flavor(2), host='host1')
        self.cloud.revert_resize(inst)
        self.verify()
        (dev,) = self.assertHolds(self.host1, inst.uuid, 1)
        self.assertEqual(old.address, dev.address)
        self.assertEqual([[old.address]], list(self.host1.held().values()))

    def test_resize_without_room_changes_nothing(self):
        inst, old = self._boot_one()
        self.cloud.boot(self.kind.flavor(4), host='host2')
        before = self.snapshot_all()
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.resize, inst,
                          self.kind.flavor(2))
        self.assertEqual(before, self.snapshot_all())
        self.assertEqual((cloud_mod.ACTIVE, None),
                         (inst.status, inst.migration))
        self.verify()


class MoveTest(base.ScenarioTestCase):
    scenarios = worlds.SCENARIOS

    def _boot_two(self):
        inst = self.cloud.boot(self.kind.flavor(2))
        return inst, self.assertHolds(self.host1, inst.uuid, 2)

    def test_cold_migrate_then_confirm(self):
        inst, old = self._boot_two()
        mig = self.cloud.migrate(inst)
        self.verify()
        new = self.assertHolds(self.host2, mig.uuid, 2)
        self.assertHolds(self.host1, inst.uuid, 2)
        self.cloud.confirm_resize(inst)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertHolds(self.host2, inst.uuid, 2)
        self.assertMdevsOf(self.host2, new)
        self.assertDomain(self.host2, inst, new)

    def test_cold_migrate_then_revert(self):
        inst, old = self._boot_two()
        self.cloud.migrate(inst)
        self.cloud.revert_resize(inst)
        self.verify()
        self.assertAllFree(self.host2)
        self.assertEqual(sorted(d.address for d in old), sorted(
            d.address for d in self.assertHolds(self.host1, inst.uuid, 2)))

    def test_cold_migrate_without_room_changes_nothing(self):
        inst, old = self._boot_two()
        self.cloud.boot(self.kind.flavor(3), host='host2')
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.migrate,
                                inst)
        self.assertEqual(['host2'], sorted(exc.reasons))
        self.assertEqual(before, self.snapshot_all())
        self.verify()

    def test_evacuate_claims_on_the_destination_without_the_source(self):
        inst, old = self._boot_two()
        self.cloud.host_down('host1')
        contacts = self.host1.contacts()
        self.cloud.evacuate(inst)
        self.assertNotContacted(self.host1, contacts)
        self.verify()          # host2 only: host1 is down
        new = self.assertHolds(self.host2, inst.uuid, 2)
        self.assertMdevsOf(self.host2, new)
        self.assertDomain(self.host2, inst, new)
        self.assertEqual('host2', inst.host)
        # The source comes back: its stale claim and guest are cleaned up.
        self.cloud.host_up('host1')
        self.verify()
        self.assertAllFree(self.host1)
        self.assertEqual({}, self.host1.fake.domains)
        self.assertHolds(self.host2, inst.uuid, 2)

    def test_evacuate_then_the_source_comes_back_rebooted(self):
        inst, old = self._boot_two()
        self.cloud.host_down('host1')
        self.cloud.evacuate(inst)
        self.cloud.host_up('host1', rebooted=True)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertHolds(self.host2, inst.uuid, 2)

    def test_evacuate_without_room_changes_nothing(self):
        inst, old = self._boot_two()
        self.cloud.boot(self.kind.flavor(3), host='host2')
        self.cloud.host_down('host1')
        contacts = self.host1.contacts()
        before = self.snapshot_all()
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.evacuate, inst)
        self.assertNotContacted(self.host1, contacts)
        self.assertEqual(before, self.snapshot_all())
        self.assertEqual('host1', inst.host)
