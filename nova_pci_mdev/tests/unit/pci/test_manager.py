"""PciDevTracker: sync, claims, frees and change tracking, table-driven,
on the host of :mod:`..fixtures.tracker_world`."""

import uuid as uuid_lib

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import opcount
from nova_pci_mdev.tests.fixtures import tracker_world as world

objects.register_all()


class TestSync(testtools.TestCase):

    # (name, whitelist excluded before, after, records after (callable on
    #  the world), expected (added, updated, removed, kept))
    CASES = [
        ('unchanged', (), (), lambda r: r, ((), (), (), ())),
        ('changed numa node', (), (),
         lambda r: [dict(x, numa_node=1) if x['address'] == world.PCI else x
                    for x in r],
         ((), (world.PCI,), (), ())),
        ('changed extra_info', (), (),
         lambda r: [dict(x, extra_info={'mdev_exists': 'true'})
                    if x['address'] == world.SLOT2 else x for x in r],
         ((), (world.SLOT2,), (), ())),
        ('vanished free', (), (), lambda r: world.without(r, world.PCI, world.SLOT3),
         ((), (), (world.PCI, world.SLOT3), ())),
        ('no longer whitelisted', (), (world.VF2,), lambda r: r,
         ((), (), (world.VF2,), ())),
        ('newly whitelisted', (world.GPU, world.SLOT1), (), lambda r: r,
         ((world.GPU, world.SLOT1), (), (), ())),
        ('vanished parent takes nothing else', (), (),
         lambda r: world.without(r, world.MTTY),
         ((), (), (world.MTTY,), ())),
    ]

    def test_first_sync_adds_whitelisted_devices(self):
        wl = world.FakeWhitelist(excluded={world.MTTY, world.SLOT3})
        tracker = manager.PciDevTracker(wl, world.TOPOLOGY)
        report = tracker.sync(world.world_records())
        self.assertEqual(tuple(a for a in world.ALL if a not in (world.MTTY, world.SLOT3)),
                         report.added)
        self.assertEqual(((), (), ()), report[1:])
        self.assertEqual(set(report.added), set(tracker.devices))
        self.assertTrue(all(s == world.S.AVAILABLE
                            for s in world.statuses(tracker).values()))
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))
        changed, deleted = tracker.pop_changes()
        self.assertEqual(set(report.added), {d.address for d in changed})
        self.assertEqual([], deleted)

    def test_sync_table(self):
        for name, before, after, change, expected in self.CASES:
            wl = world.FakeWhitelist(excluded=before)
            tracker = world.new_tracker(wl, world.world_records())
            wl.excluded = set(after)
            records = change(world.world_records())
            report = tracker.sync(records)
            self.assertEqual(expected, tuple(report), name)
            expected_addrs = {r['address'] for r in records} - set(after)
            self.assertEqual(expected_addrs, set(tracker.devices), name)
            for rec in records:
                dev = tracker.devices.get(rec['address'])
                if dev is not None:
                    self.assertEqual(rec['numa_node'], dev.numa_node, name)
            self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker),
                             name)
            changed, deleted = tracker.pop_changes()
            self.assertEqual(set(report.added) | set(report.updated),
                             {d.address for d in changed}, name)
            self.assertEqual(sorted(report.removed), deleted, name)
            self.assertEqual(([], []), tracker.pop_changes(), name)

    def test_links_follow_the_records(self):
        tracker = world.new_tracker(records=world.world_records())
        devs = tracker.devices
        self.assertEqual([world.VF1, world.VF2],
                         [c.address for c in devs[world.PF].child_devices])
        self.assertIs(devs[world.GPU], devs[world.SLOT2].parent_device)
        self.assertIs(devs[world.MTTY], devs[world.SLOT3].parent_device)
        self.assertIsNone(devs[world.PCI].parent_device)
        # A slot moves to another parent.
        records = [dict(r, parent_addr=world.MTTY) if r['address'] == world.SLOT2 else r
                   for r in world.world_records()]
        tracker.sync(records)
        self.assertEqual([world.SLOT1],
                         [c.address for c in devs[world.GPU].child_devices])
        self.assertEqual({world.SLOT2, world.SLOT3},
                         {c.address for c in devs[world.MTTY].child_devices})

    def test_claimed_or_allocated_device_is_kept_until_freed(self):
        for allocate in (False, True):
            tracker = world.new_tracker(records=world.world_records())
            tracker.claim_devices(world.INST_A, [world.VF1])
            if allocate:
                tracker.allocate_instance(world.INST_A)
            tracker.pop_changes()
            report = tracker.sync(world.without(world.world_records(), world.VF1, world.VF2))
            self.assertEqual(((), (), (world.VF2,), (world.VF1,)), tuple(report))
            vf1 = tracker.devices[world.VF1]
            self.assertTrue(device_table.is_missing(vf1))
            self.assertEqual('true', vf1.extra_info['missing'])
            self.assertEqual(world.INST_A, vf1.instance_uuid)
            changed, deleted = tracker.pop_changes()
            self.assertEqual([world.VF1], [d.address for d in changed])
            self.assertEqual([world.VF2], deleted)
            # Every sync reports it again, without changing it again.
            report = tracker.sync(world.without(world.world_records(), world.VF1, world.VF2))
            self.assertEqual(((), (), (), (world.VF1,)), tuple(report))
            self.assertEqual(([], []), tracker.pop_changes())
            # Freed: deleted, and its parent released.
            self.assertEqual([vf1], tracker.free_instance(world.INST_A))
            self.assertNotIn(world.VF1, tracker.devices)
            self.assertEqual(world.S.REMOVED, vf1.status)
            self.assertEqual(world.S.AVAILABLE, tracker.devices[world.PF].status)
            self.assertEqual([], tracker.devices[world.PF].child_devices)
            changed, deleted = tracker.pop_changes()
            self.assertEqual([world.PF], [d.address for d in changed])
            self.assertEqual([world.VF1], deleted)
            self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))

    def test_no_longer_whitelisted_in_use_device_is_kept(self):
        wl = world.FakeWhitelist()
        tracker = world.new_tracker(wl, world.world_records())
        tracker.claim_devices(world.INST_A, [world.SLOT1])
        wl.excluded = {world.SLOT1, world.SLOT2}
        report = tracker.sync(world.world_records())
        self.assertEqual(((), (), (world.SLOT2,), (world.SLOT1,)), tuple(report))
        self.assertEqual(world.S.UNCLAIMABLE, tracker.devices[world.GPU].status)
        self.assertEqual([world.SLOT1], [d.address for d in
                                         tracker.free_device(world.SLOT1, world.INST_A)])
        self.assertNotIn(world.SLOT1, tracker.devices)
        self.assertEqual([], tracker.devices[world.GPU].child_devices)
        self.assertEqual(world.S.AVAILABLE, tracker.devices[world.GPU].status)

    def test_unchanged_records_ask_a_pure_whitelist_nothing(self):
        wl = world.FakeWhitelist(pure=True)
        tracker = world.new_tracker(wl, world.world_records())
        wl.calls = 0
        self.assertFalse(any(tracker.sync(world.world_records())))
        self.assertEqual(0, wl.calls)
        moved = [dict(r, numa_node=5) if r['address'] == world.VF1 else r
                 for r in world.world_records()]
        report = tracker.sync(moved)
        self.assertEqual(((), (world.VF1,), (), ()), tuple(report))
        self.assertEqual(1, wl.calls)
        self.assertEqual(5, tracker.devices[world.VF1].numa_node)
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))

    def test_reappearing_device_is_applied_again_with_a_pure_whitelist(self):
        tracker = world.new_tracker(world.FakeWhitelist(pure=True), world.world_records())
        tracker.claim_devices(world.INST_A, [world.SLOT2])
        tracker.sync(world.without(world.world_records(), world.SLOT2))
        self.assertTrue(device_table.is_missing(tracker.devices[world.SLOT2]))
        report = tracker.sync(world.world_records())
        self.assertEqual(((), (world.SLOT2,), (), ()), tuple(report))
        self.assertFalse(device_table.is_missing(tracker.devices[world.SLOT2]))
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))

    def test_reappearing_device_loses_its_flag(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.SLOT2])
        tracker.sync(world.without(world.world_records(), world.SLOT2))
        self.assertTrue(device_table.is_missing(tracker.devices[world.SLOT2]))
        tracker.pop_changes()
        report = tracker.sync(world.world_records())
        self.assertEqual(((), (world.SLOT2,), (), ()), tuple(report))
        slot = tracker.devices[world.SLOT2]
        self.assertFalse(device_table.is_missing(slot))
        self.assertEqual((world.S.CLAIMED, world.INST_A), (slot.status,
                                                           slot.instance_uuid))
        self.assertEqual([slot], tracker.pop_changes()[0])
        # Freed now, it stays: it is on the host again.
        tracker.free_instance(world.INST_A)
        self.assertEqual(world.S.AVAILABLE, tracker.devices[world.SLOT2].status)

    def test_parent_that_comes_back_gets_the_status_of_its_children(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.VF1])
        tracker.allocate_instance(world.INST_A)
        report = tracker.sync(world.without(world.world_records(), world.PF))
        self.assertEqual((world.PF,), report.removed)
        self.assertIsNone(tracker.devices[world.VF1].parent_device)
        report = tracker.sync(world.world_records())
        self.assertEqual((world.PF,), report.added)
        pf = tracker.devices[world.PF]
        self.assertEqual(world.S.UNAVAILABLE, pf.status)
        self.assertIs(pf, tracker.devices[world.VF1].parent_device)
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))
        tracker.free_instance(world.INST_A)
        self.assertEqual(world.S.AVAILABLE, pf.status)

    def test_child_that_appears_under_a_parent_in_use_is_blocked(self):
        tracker = world.new_tracker(records=world.without(world.world_records(), world.VF2))
        tracker.claim_instance(world.INST_A, [world.request(dev_type=world.T.SRIOV_PF)])
        tracker.sync(world.world_records())
        self.assertEqual(world.S.UNCLAIMABLE, tracker.devices[world.VF2].status)
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))

    def test_tags_follow_the_whitelist(self):
        wl = world.FakeWhitelist()
        tracker = world.new_tracker(wl, world.world_records())
        wl.tags = {world.PCI: {'physical_network': 'physnet1'}}
        report = tracker.sync(world.world_records())
        self.assertEqual((), report.updated)   # tags are not device fields
        self.assertEqual({'physical_network': 'physnet1'},
                         tracker.tags_of(tracker.devices[world.PCI]))
        devs = tracker.claim_instance(
            world.INST_A, [world.request(physical_network='physnet1')])
        self.assertEqual([world.PCI], [d.address for d in devs])

    def test_record_with_bad_value_changes_nothing(self):
        tracker = world.new_tracker(records=world.world_records())
        before = world.snapshot(tracker)
        records = world.without(world.world_records(), world.PCI) + [
            world.record('0000:90:00.0', dev_type='type-XYZ')]
        err = self.assertRaises(exception.InvalidValue, tracker.sync,
                                records)
        self.assertIn('type-XYZ', str(err))
        self.assertEqual(before, world.snapshot(tracker))

    def test_record_without_address_is_refused(self):
        tracker = world.new_tracker()
        rec = world.record(world.PCI)
        del rec['address']
        err = self.assertRaises(exception.InvalidValue, tracker.sync, [rec])
        self.assertIn('address', str(err))

    def test_sync_is_linear(self):
        """Calls per device of a first sync and of a resync (one PF gone:
        every VF relinked) stay flat when the host grows 4x (Nova's sync is
        quadratic: about 100 s for 10,000 devices)."""
        def work(buses):
            records = []
            for bus in range(buses):
                pf = '0000:%02x:00.0' % bus
                records.append(world.record(pf, world.T.SRIOV_PF, product_id='1572'))
                for fn in range(49):
                    records.append(world.record(
                        '0000:%02x:%02x.%d' % (bus, 1 + fn // 8, fn % 8),
                        world.T.SRIOV_VF, product_id='154c', parent_addr=pf))
            tracker = manager.PciDevTracker(world.FakeWhitelist(), world.TOPOLOGY)

            def sync_twice():
                added = tracker.sync(records).added
                tracker.sync(records[1:])
                return len(added), len(tracker.devices)
            return sync_twice

        self.assertEqual((200, 199), work(4)())
        self.assertLess(opcount.growth(work, 4, 16), 1.3)

    def test_a_removal_costs_its_relatives_not_the_host(self):
        """A resync that only drops one free VF does, beyond the lookups
        of an unchanged resync, work for that VF and its PF alone: the
        same number of calls on a host 16 times as big."""
        def extra(buses):
            records = []
            for bus in range(buses):
                pf = '0000:%02x:00.0' % bus
                records.append(world.record(pf, world.T.SRIOV_PF, product_id='1572'))
                records += [world.record('0000:%02x:01.%d' % (bus, fn),
                                         world.T.SRIOV_VF, product_id='154c',
                                         parent_addr=pf) for fn in range(7)]
            tracker = manager.PciDevTracker(world.FakeWhitelist(pure=True),
                                            world.TOPOLOGY)
            tracker.sync(records)
            _, same = opcount.calls(tracker.sync, list(records))
            report, fewer = opcount.calls(tracker.sync, records[:-1])
            self.assertEqual((records[-1]['address'],), report.removed)
            pf = tracker.devices[records[-8]['address']]
            self.assertEqual(6, len(pf.child_devices))
            return fewer - same

        small, large = extra(4), extra(64)
        self.assertLess(abs(large - small), 0.1 * small + 10)


class TestClaims(testtools.TestCase):

    # (name, requests, claimed addresses, statuses of relatives after the
    #  claim, after allocation)
    CASES = [
        ('pci', [dict(vendor_id='8086', product_id='1520')], [world.PCI], {}, {}),
        ('vf', [dict(dev_type=world.T.SRIOV_VF)], [world.VF1],
         {world.PF: world.S.UNCLAIMABLE, world.VF2: world.S.AVAILABLE},
         {world.PF: world.S.UNAVAILABLE, world.VF2: world.S.AVAILABLE}),
        ('pf whole', [dict(dev_type=world.T.SRIOV_PF)], [world.PF],
         {world.VF1: world.S.UNCLAIMABLE, world.VF2: world.S.UNCLAIMABLE},
         {world.VF1: world.S.UNAVAILABLE, world.VF2: world.S.UNAVAILABLE}),
        ('mdev slot', [dict(mdev_type='nvidia-35', dev_type=world.T.MDEV_VF)],
         [world.SLOT1], {world.GPU: world.S.UNCLAIMABLE, world.SLOT2: world.S.AVAILABLE},
         {world.GPU: world.S.UNAVAILABLE, world.SLOT2: world.S.AVAILABLE}),
        ('mdev parent whole', [dict(dev_type=world.T.MDEV_PF, vendor_id='10de')],
         [world.GPU], {world.SLOT1: world.S.UNCLAIMABLE, world.SLOT2: world.S.UNCLAIMABLE},
         {world.SLOT1: world.S.UNAVAILABLE, world.SLOT2: world.S.UNAVAILABLE}),
        ('mtty slot', [dict(mdev_type='mtty-2')], [world.SLOT3],
         {world.MTTY: world.S.UNCLAIMABLE}, {world.MTTY: world.S.UNAVAILABLE}),
        ('two slots', [dict(mdev_type='nvidia-35', count=2)],
         [world.SLOT1, world.SLOT2], {world.GPU: world.S.UNCLAIMABLE}, {world.GPU: world.S.UNAVAILABLE}),
        ('two requests', [dict(dev_type=world.T.SRIOV_VF),
                          dict(mdev_type='mtty-2')],
         [world.VF1, world.SLOT3], {world.PF: world.S.UNCLAIMABLE, world.MTTY: world.S.UNCLAIMABLE},
         {world.PF: world.S.UNAVAILABLE, world.MTTY: world.S.UNAVAILABLE}),
    ]

    def test_claim_allocate_free_table(self):
        for name, specs, addrs, claimed_rel, allocated_rel in self.CASES:
            tracker = world.new_tracker(records=world.world_records())
            initial = world.snapshot(tracker)
            requests = [world.request(count=s.pop('count', 1), **s)
                        for s in [dict(s) for s in specs]]
            devs = tracker.claim_instance(world.INST_A, requests)
            self.assertEqual(sorted(addrs), sorted(d.address for d in devs),
                             name)
            want_ids = [r.request_id for r in requests for _ in
                        range(r.count)]
            self.assertEqual(want_ids, [d.request_id for d in devs], name)
            for dev in devs:
                self.assertEqual((world.S.CLAIMED, world.INST_A),
                                 (dev.status, dev.instance_uuid), name)
            self.assertEqual(devs, tracker.devices_of(world.INST_A), name)
            for address, status in claimed_rel.items():
                self.assertEqual(status, tracker.devices[address].status,
                                 name + ' ' + address)
            self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker),
                             name)
            changed, _ = tracker.pop_changes()
            self.assertEqual(world.differing(initial, world.snapshot(tracker)),
                             {d.address for d in changed}, name)

            self.assertEqual(devs, tracker.allocate_instance(world.INST_A), name)
            self.assertEqual([], tracker.allocate_instance(world.INST_A), name)
            for address in addrs:
                self.assertEqual(world.S.ALLOCATED,
                                 tracker.devices[address].status, name)
            for address, status in allocated_rel.items():
                self.assertEqual(status, tracker.devices[address].status,
                                 name + ' ' + address)
            self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker),
                             name)

            self.assertEqual(devs, tracker.free_instance(world.INST_A), name)
            self.assertEqual([], tracker.free_instance(world.INST_A), name)
            self.assertEqual([], tracker.devices_of(world.INST_A), name)
            after = world.snapshot(tracker)
            # Back as before, except the cleared request ids of course.
            self.assertEqual(initial, after, name)

    def test_request_that_does_not_fit_changes_nothing(self):
        cases = [
            ('too many slots', [world.request(count=3, mdev_type='nvidia-35')]),
            ('second request fails',
             [world.request(dev_type=world.T.SRIOV_VF),
              world.request(count=2, mdev_type='mtty-2')]),
            ('numa required', [world.request(mdev_type='nvidia-35',
                                             numa_policy='required')]),
        ]
        for name, requests in cases:
            tracker = world.new_tracker(records=world.world_records())
            before = world.snapshot(tracker)
            err = self.assertRaises(
                exception.PciDeviceRequestFailed, tracker.claim_instance,
                world.INST_A, requests, [world.TOPOLOGY.cells[0]])
            self.assertIn('alias', str(err), name)
            self.assertEqual(before, world.snapshot(tracker), name)
            self.assertEqual(([], []), tracker.pop_changes(), name)

    def test_numa_required_picks_the_instance_node(self):
        records = world.world_records() + [
            world.record('0000:85:00.0', world.T.MDEV_PF, vendor_id='10de',
                         product_id='1eb8', numa_node=0, mdev_type='nvidia-35'),
            world.record('4b20d080-1b54-4048-85b3-a6a62d165c09', world.T.MDEV_VF,
                         vendor_id='10de', product_id='1eb8', numa_node=0,
                         parent_addr='0000:85:00.0', mdev_type='nvidia-35')]
        tracker = world.new_tracker(records=records)
        devs = tracker.claim_instance(
            world.INST_A, [world.request(mdev_type='nvidia-35', numa_policy='required')],
            [world.TOPOLOGY.cells[1]])
        self.assertEqual([1], [d.numa_node for d in devs])

    def test_parent_in_use_blocks_children_and_the_reverse(self):
        # (first claim, second claim that must fail)
        cases = [
            ('pf blocks vf', dict(dev_type=world.T.SRIOV_PF),
             dict(dev_type=world.T.SRIOV_VF)),
            ('vf blocks pf', dict(dev_type=world.T.SRIOV_VF),
             dict(dev_type=world.T.SRIOV_PF)),
            ('mdev-pf blocks slot', dict(dev_type=world.T.MDEV_PF,
                                         vendor_id='10de'),
             dict(mdev_type='nvidia-35')),
            ('slot blocks mdev-pf', dict(mdev_type='nvidia-35'),
             dict(dev_type=world.T.MDEV_PF, vendor_id='10de')),
        ]
        for name, first, second in cases:
            for allocate in (False, True):
                tracker = world.new_tracker(records=world.world_records())
                tracker.claim_instance(world.INST_A, [world.request(**first)])
                if allocate:
                    tracker.allocate_instance(world.INST_A)
                tracker.pop_changes()
                before = world.snapshot(tracker)
                self.assertRaises(exception.PciDeviceRequestFailed,
                                  tracker.claim_instance, world.INST_B,
                                  [world.request(**second)])
                self.assertEqual(before, world.snapshot(tracker), name)
                self.assertEqual(([], []), tracker.pop_changes(), name)
                # The same through the Placement path (specific devices).
                target = {'pf blocks vf': world.VF2, 'vf blocks pf': world.PF,
                          'mdev-pf blocks slot': world.SLOT2,
                          'slot blocks mdev-pf': world.GPU}[name]
                self.assertRaises(exception.NovaPciMdevException,
                                  tracker.claim_devices, world.INST_B, [target])
                self.assertEqual(before, world.snapshot(tracker), name)
                # Freed, the second claim works.
                tracker.free_instance(world.INST_A)
                tracker.claim_instance(world.INST_B, [world.request(**second)])

    def test_claim_devices(self):
        tracker = world.new_tracker(records=world.world_records())
        rid = str(uuid_lib.uuid4())
        devs = tracker.claim_devices(world.INST_A, [world.SLOT2.upper()], request_id=rid)
        self.assertEqual([world.SLOT2], [d.address for d in devs])
        self.assertEqual((world.S.CLAIMED, rid), (devs[0].status,
                                                  devs[0].request_id))
        self.assertEqual(world.S.UNCLAIMABLE, tracker.devices[world.GPU].status)
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))
        # Retrying is harmless.
        tracker.pop_changes()
        self.assertEqual(devs, tracker.claim_devices(world.INST_A, [world.SLOT2]))
        self.assertEqual(([], []), tracker.pop_changes())

    def test_transfer_keeps_status_request_ids_and_relatives(self):
        tracker = world.new_tracker(records=world.world_records())
        rid = str(uuid_lib.uuid4())
        tracker.claim_devices(world.INST_A, [world.SLOT1, world.SLOT2], request_id=rid)
        tracker.allocate_instance(world.INST_A)
        tracker.pop_changes()
        pools = world.pool_counts(tracker)
        moved = tracker.transfer(world.INST_A, world.INST_B)
        self.assertEqual([world.SLOT1, world.SLOT2], [d.address for d in moved])
        self.assertEqual([], tracker.devices_of(world.INST_A))
        self.assertEqual(moved, tracker.devices_of(world.INST_B))
        for dev in moved:
            self.assertEqual((world.S.ALLOCATED, world.INST_B, rid),
                             (dev.status, dev.instance_uuid, dev.request_id))
        self.assertEqual(world.S.UNAVAILABLE, tracker.devices[world.GPU].status)
        self.assertEqual(pools, world.pool_counts(tracker))
        changed, deleted = tracker.pop_changes()
        self.assertEqual({world.SLOT1, world.SLOT2}, {d.address for d in changed})
        self.assertEqual([], deleted)
        # Nothing to move is fine; a new owner that holds devices is not.
        self.assertEqual([], tracker.transfer(world.INST_A, str(uuid_lib.uuid4())))
        tracker.claim_devices(world.INST_A, [world.SLOT3])
        self.assertRaises(exception.InvalidValue, tracker.transfer,
                          world.INST_A, world.INST_B)
        self.assertEqual([world.SLOT3], [d.address
                                         for d in tracker.devices_of(world.INST_A)])

    def test_claim_devices_all_or_nothing(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_B, [world.SLOT3])
        tracker.pop_changes()
        before = world.snapshot(tracker)
        # (addresses, error)
        cases = [
            ([world.SLOT1, '0000:99:00.0'], exception.PciDeviceNotFound),
            ([world.SLOT1, world.SLOT3], exception.PciDeviceInvalidStatus),
            ([world.SLOT1, world.GPU], exception.PciDeviceInvalidStatus),
            ([world.MTTY], exception.PciDeviceInvalidStatus),
            ([world.VF1, 'not/an/address'], exception.InvalidPciAddress),
        ]
        for addresses, error in cases:
            self.assertRaises(error, tracker.claim_devices, world.INST_A,
                              addresses)
            self.assertEqual(before, world.snapshot(tracker), addresses)
            self.assertEqual(([], []), tracker.pop_changes())

    def test_no_device_goes_to_two_instances(self):
        tracker = world.new_tracker(records=world.world_records())
        got = {}
        for n in range(20):
            inst = str(uuid_lib.uuid4())
            try:
                devs = tracker.claim_instance(inst, [world.request(
                    mdev_type='nvidia-35')])
            except exception.PciDeviceRequestFailed:
                continue
            for dev in devs:
                self.assertNotIn(dev.address, got)
                got[dev.address] = inst
        self.assertEqual({world.SLOT1, world.SLOT2}, set(got))


class TestFrees(testtools.TestCase):

    def test_free_unknown_instance_is_a_noop(self):
        tracker = world.new_tracker(records=world.world_records())
        self.assertEqual([], tracker.free_instance(world.INST_A))
        self.assertEqual(([], []), tracker.pop_changes())

    def test_free_device(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_instance(world.INST_A, [world.request(mdev_type='nvidia-35',
                                                            count=2)])
        tracker.allocate_instance(world.INST_A)
        tracker.pop_changes()
        before = world.snapshot(tracker)
        # (device, instance) pairs that must not free anything.
        for dev, inst in [(world.SLOT1, world.INST_B), (world.PCI, world.INST_A),
                          ('0000:99:00.0', world.INST_A)]:
            self.assertEqual([], tracker.free_device(dev, inst))
            self.assertEqual(before, world.snapshot(tracker))
        slot1 = tracker.devices[world.SLOT1]
        self.assertEqual([slot1], tracker.free_device(slot1, world.INST_A))
        self.assertEqual(world.S.UNAVAILABLE, tracker.devices[world.GPU].status)
        self.assertEqual([tracker.devices[world.SLOT2]],
                         tracker.devices_of(world.INST_A))
        self.assertEqual([], tracker.free_device(slot1, world.INST_A))
        tracker.free_device(world.SLOT2, world.INST_A)
        self.assertEqual(world.S.AVAILABLE, tracker.devices[world.GPU].status)
        self.assertEqual([], tracker.instances())
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))

    def test_free_claimed_and_allocated_together(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.VF1])
        tracker.allocate_instance(world.INST_A)
        tracker.claim_devices(world.INST_A, [world.VF2])      # e.g. resize on the host
        self.assertEqual([world.S.ALLOCATED, world.S.CLAIMED],
                         [d.status for d in tracker.devices_of(world.INST_A)])
        self.assertEqual(world.S.UNAVAILABLE, tracker.devices[world.PF].status)
        self.assertEqual(2, len(tracker.free_instance(world.INST_A)))
        self.assertEqual(world.S.AVAILABLE, tracker.devices[world.PF].status)
        self.assertEqual(world.available_counts(tracker), world.pool_counts(tracker))


class TestLoad(testtools.TestCase):

    def test_loaded_devices_rebuild_links_owners_and_pools(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.VF1, world.SLOT3])
        tracker.allocate_instance(world.INST_A)
        tracker.claim_devices(world.INST_B, [world.SLOT1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        again = manager.PciDevTracker(world.FakeWhitelist(), world.TOPOLOGY, copies)
        self.assertEqual(world.snapshot(tracker), world.snapshot(again))
        self.assertEqual(([], []), again.pop_changes())

    def test_loaded_device_no_longer_whitelisted(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.VF1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        again = manager.PciDevTracker(world.FakeWhitelist(excluded={world.VF1, world.VF2}),
                                      world.TOPOLOGY, copies)
        self.assertNotIn(world.VF2, again.devices)
        self.assertTrue(device_table.is_missing(again.devices[world.VF1]))
        changed, deleted = again.pop_changes()
        self.assertEqual([world.VF1], [d.address for d in changed])
        self.assertEqual([world.VF2], deleted)

    def test_inconsistent_free_statuses_are_repaired(self):
        tracker = world.new_tracker(records=world.world_records())
        tracker.claim_devices(world.INST_A, [world.SLOT1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        by_addr = {d.address: d for d in copies}
        by_addr[world.GPU].status = world.S.AVAILABLE       # should be unclaimable
        by_addr[world.PF].status = world.S.UNAVAILABLE      # should be available
        again = manager.PciDevTracker(world.FakeWhitelist(), world.TOPOLOGY, copies)
        self.assertEqual(world.statuses(tracker), world.statuses(again))
        self.assertEqual({world.GPU, world.PF},
                         {d.address for d in again.pop_changes()[0]})
        self.assertEqual(world.available_counts(again), world.pool_counts(again))
