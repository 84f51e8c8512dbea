"""PciDevTracker: sync, claims, frees and change tracking, table-driven.

The host used by most tests (``world_records``)::

    NUMA 0                                NUMA 1
    0000:81:00.0  type-PCI 8086:1520      0000:84:00.0  mdev-pf 10de:1eb8
    0000:82:00.0  type-PF  8086:1572        |- SLOT1   mdev-vf nvidia-35
      |- 0000:82:02.0  type-VF 8086:154c    '- SLOT2   mdev-vf nvidia-35
      '- 0000:82:02.1  type-VF 8086:154c
    (no node)  mtty  mdev-pf (virtual)
                 '- SLOT3  mdev-vf mtty-2

The whitelist is a small injected double; the pools are the real
``PciDeviceStats``. The helpers here are shared by the store and property
tests.
"""

import collections
import uuid as uuid_lib

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev import objects
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import opcount

objects.register_all()

S = fields.PciDeviceStatus
T = fields.PciDeviceType

PCI = '0000:81:00.0'
PF = '0000:82:00.0'
VF1 = '0000:82:02.0'
VF2 = '0000:82:02.1'
GPU = '0000:84:00.0'
SLOT1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
SLOT2 = '4b20d080-1b54-4048-85b3-a6a62d165c02'
MTTY = 'mtty'
SLOT3 = '4b20d080-1b54-4048-85b3-a6a62d165c03'
ALL = (PCI, PF, VF1, VF2, GPU, SLOT1, SLOT2, MTTY, SLOT3)

INST_A = 'aaaaaaaa-0000-4000-8000-000000000001'
INST_B = 'bbbbbbbb-0000-4000-8000-000000000002'

TOPOLOGY = numa.HostTopology(cells=(numa.HostCell(id=0, socket=0),
                                    numa.HostCell(id=1, socket=1)))


class FakeSpec(object):
    def __init__(self, tags):
        self.tags = tags


class FakeWhitelist(object):
    """Matches every device except the ``excluded`` addresses.

    ``tags`` maps an address to the tags its spec carries. Both may be
    changed between syncs, like an operator editing device_spec.
    """

    def __init__(self, excluded=(), tags=None, pure=False):
        self.excluded = set(excluded)
        self.tags = dict(tags or {})
        self.calls = 0
        # Promises not to change excluded/tags (the tracker may skip it).
        self.pure = pure

    def match(self, dev):
        self.calls += 1
        address = dev['address'] if isinstance(dev, dict) else dev.address
        if address in self.excluded:
            return None
        return FakeSpec(dict(self.tags.get(address, {})))


def record(address, dev_type=T.STANDARD, vendor_id='8086',
           product_id='1520', numa_node=0, parent_addr=None, mdev_type=None,
           **extra):
    return {'address': address, 'vendor_id': vendor_id,
            'product_id': product_id, 'dev_type': dev_type,
            'numa_node': numa_node, 'parent_addr': parent_addr,
            'mdev_type': mdev_type,
            'label': 'label_%s_%s' % (vendor_id, product_id),
            'dev_id': 'dev_' + address.replace(':', '_').replace('.', '_'),
            'extra_info': dict(extra)}


def world_records():
    gpu = dict(vendor_id='10de', product_id='1eb8', numa_node=1)
    return [
        record(PCI),
        record(PF, T.SRIOV_PF, product_id='1572'),
        record(VF1, T.SRIOV_VF, product_id='154c', parent_addr=PF),
        record(VF2, T.SRIOV_VF, product_id='154c', parent_addr=PF),
        record(GPU, T.MDEV_PF, mdev_type='nvidia-35', resource_class='VGPU',
               **gpu),
        record(SLOT1, T.MDEV_VF, parent_addr=GPU, mdev_type='nvidia-35',
               mdev_exists='true', **gpu),
        record(SLOT2, T.MDEV_VF, parent_addr=GPU, mdev_type='nvidia-35',
               **gpu),
        record(MTTY, T.MDEV_PF, vendor_id='', product_id='', numa_node=None,
               mdev_type='mtty-2', virtual='true'),
        record(SLOT3, T.MDEV_VF, vendor_id='', product_id='',
               numa_node=None, parent_addr=MTTY, mdev_type='mtty-2'),
    ]


def without(records, *addresses):
    return [r for r in records if r['address'] not in addresses]


def request(count=1, numa_policy=None, alias_name='alias', **spec):
    return objects.InstancePCIRequest(
        count=count, spec=[spec], alias_name=alias_name,
        numa_policy=numa_policy, request_id=str(uuid_lib.uuid4()))


def new_tracker(whitelist=None, records=None, devices=()):
    tracker = manager.PciDevTracker(whitelist or FakeWhitelist(), TOPOLOGY,
                                    devices)
    if records is not None:
        tracker.sync(records)
    tracker.pop_changes()
    return tracker


def pool_counts(tracker):
    """(vendor, product, dev_type, mdev_type, numa_node) -> free count."""
    counts = collections.Counter()
    for pool in tracker.stats.to_pool_list():
        counts[(pool.vendor_id, pool.product_id, pool.tags['dev_type'],
                pool.mdev_type, pool.numa_node)] += pool.count
    return {k: v for k, v in counts.items() if v}


def available_counts(tracker):
    counts = collections.Counter(
        (d.vendor_id, d.product_id, d.dev_type, d.mdev_type, d.numa_node)
        for d in tracker.devices.values() if d.status == S.AVAILABLE)
    return dict(counts)


def statuses(tracker):
    return {a: d.status for a, d in tracker.devices.items()}


def snapshot(tracker):
    """Everything a failed operation must leave as it was."""
    devices = {}
    for address, dev in tracker.devices.items():
        devices[address] = (
            dev.status, dev.instance_uuid, dev.request_id,
            dict(dev.extra_info), dev.numa_node, dev.dev_type,
            dev.parent_device.address if dev.parent_device else None,
            tuple(sorted(c.address for c in dev.child_devices)))
    owners = {uuid: sorted(d.address for d in tracker.devices_of(uuid))
              for uuid in tracker.instances()}
    return devices, pool_counts(tracker), owners


def differing(before, after):
    """Addresses whose device state differs between two snapshots."""
    return {a for a in set(before[0]) | set(after[0])
            if before[0].get(a) != after[0].get(a)}


class TestSync(testtools.TestCase):

    # (name, whitelist excluded before, after, records after (callable on
    #  the world), expected (added, updated, removed, kept))
    CASES = [
        ('unchanged', (), (), lambda r: r, ((), (), (), ())),
        ('changed numa node', (), (),
         lambda r: [dict(x, numa_node=1) if x['address'] == PCI else x
                    for x in r],
         ((), (PCI,), (), ())),
        ('changed extra_info', (), (),
         lambda r: [dict(x, extra_info={'mdev_exists': 'true'})
                    if x['address'] == SLOT2 else x for x in r],
         ((), (SLOT2,), (), ())),
        ('vanished free', (), (), lambda r: without(r, PCI, SLOT3),
         ((), (), (PCI, SLOT3), ())),
        ('no longer whitelisted', (), (VF2,), lambda r: r,
         ((), (), (VF2,), ())),
        ('newly whitelisted', (GPU, SLOT1), (), lambda r: r,
         ((GPU, SLOT1), (), (), ())),
        ('vanished parent takes nothing else', (), (),
         lambda r: without(r, MTTY),
         ((), (), (MTTY,), ())),
    ]

    def test_first_sync_adds_whitelisted_devices(self):
        wl = FakeWhitelist(excluded={MTTY, SLOT3})
        tracker = manager.PciDevTracker(wl, TOPOLOGY)
        report = tracker.sync(world_records())
        self.assertEqual(tuple(a for a in ALL if a not in (MTTY, SLOT3)),
                         report.added)
        self.assertEqual(((), (), ()), report[1:])
        self.assertEqual(set(report.added), set(tracker.devices))
        self.assertTrue(all(s == S.AVAILABLE
                            for s in statuses(tracker).values()))
        self.assertEqual(available_counts(tracker), pool_counts(tracker))
        changed, deleted = tracker.pop_changes()
        self.assertEqual(set(report.added), {d.address for d in changed})
        self.assertEqual([], deleted)

    def test_sync_table(self):
        for name, before, after, change, expected in self.CASES:
            wl = FakeWhitelist(excluded=before)
            tracker = new_tracker(wl, world_records())
            wl.excluded = set(after)
            records = change(world_records())
            report = tracker.sync(records)
            self.assertEqual(expected, tuple(report), name)
            expected_addrs = {r['address'] for r in records} - set(after)
            self.assertEqual(expected_addrs, set(tracker.devices), name)
            for rec in records:
                dev = tracker.devices.get(rec['address'])
                if dev is not None:
                    self.assertEqual(rec['numa_node'], dev.numa_node, name)
            self.assertEqual(available_counts(tracker), pool_counts(tracker),
                             name)
            changed, deleted = tracker.pop_changes()
            self.assertEqual(set(report.added) | set(report.updated),
                             {d.address for d in changed}, name)
            self.assertEqual(sorted(report.removed), deleted, name)
            self.assertEqual(([], []), tracker.pop_changes(), name)

    def test_links_follow_the_records(self):
        tracker = new_tracker(records=world_records())
        devs = tracker.devices
        self.assertEqual([VF1, VF2],
                         [c.address for c in devs[PF].child_devices])
        self.assertIs(devs[GPU], devs[SLOT2].parent_device)
        self.assertIs(devs[MTTY], devs[SLOT3].parent_device)
        self.assertIsNone(devs[PCI].parent_device)
        # A slot moves to another parent.
        records = [dict(r, parent_addr=MTTY) if r['address'] == SLOT2 else r
                   for r in world_records()]
        tracker.sync(records)
        self.assertEqual([SLOT1],
                         [c.address for c in devs[GPU].child_devices])
        self.assertEqual({SLOT2, SLOT3},
                         {c.address for c in devs[MTTY].child_devices})

    def test_claimed_or_allocated_device_is_kept_until_freed(self):
        for allocate in (False, True):
            tracker = new_tracker(records=world_records())
            tracker.claim_devices(INST_A, [VF1])
            if allocate:
                tracker.allocate_instance(INST_A)
            tracker.pop_changes()
            report = tracker.sync(without(world_records(), VF1, VF2))
            self.assertEqual(((), (), (VF2,), (VF1,)), tuple(report))
            vf1 = tracker.devices[VF1]
            self.assertTrue(device_table.is_missing(vf1))
            self.assertEqual('true', vf1.extra_info['missing'])
            self.assertEqual(INST_A, vf1.instance_uuid)
            changed, deleted = tracker.pop_changes()
            self.assertEqual([VF1], [d.address for d in changed])
            self.assertEqual([VF2], deleted)
            # Every sync reports it again, without changing it again.
            report = tracker.sync(without(world_records(), VF1, VF2))
            self.assertEqual(((), (), (), (VF1,)), tuple(report))
            self.assertEqual(([], []), tracker.pop_changes())
            # Freed: deleted, and its parent released.
            self.assertEqual([vf1], tracker.free_instance(INST_A))
            self.assertNotIn(VF1, tracker.devices)
            self.assertEqual(S.REMOVED, vf1.status)
            self.assertEqual(S.AVAILABLE, tracker.devices[PF].status)
            self.assertEqual([], tracker.devices[PF].child_devices)
            changed, deleted = tracker.pop_changes()
            self.assertEqual([PF], [d.address for d in changed])
            self.assertEqual([VF1], deleted)
            self.assertEqual(available_counts(tracker), pool_counts(tracker))

    def test_no_longer_whitelisted_in_use_device_is_kept(self):
        wl = FakeWhitelist()
        tracker = new_tracker(wl, world_records())
        tracker.claim_devices(INST_A, [SLOT1])
        wl.excluded = {SLOT1, SLOT2}
        report = tracker.sync(world_records())
        self.assertEqual(((), (), (SLOT2,), (SLOT1,)), tuple(report))
        self.assertEqual(S.UNCLAIMABLE, tracker.devices[GPU].status)
        self.assertEqual([SLOT1], [d.address for d in
                                   tracker.free_device(SLOT1, INST_A)])
        self.assertNotIn(SLOT1, tracker.devices)
        self.assertEqual([], tracker.devices[GPU].child_devices)
        self.assertEqual(S.AVAILABLE, tracker.devices[GPU].status)

    def test_unchanged_records_ask_a_pure_whitelist_nothing(self):
        wl = FakeWhitelist(pure=True)
        tracker = new_tracker(wl, world_records())
        wl.calls = 0
        self.assertFalse(any(tracker.sync(world_records())))
        self.assertEqual(0, wl.calls)
        moved = [dict(r, numa_node=5) if r['address'] == VF1 else r
                 for r in world_records()]
        report = tracker.sync(moved)
        self.assertEqual(((), (VF1,), (), ()), tuple(report))
        self.assertEqual(1, wl.calls)
        self.assertEqual(5, tracker.devices[VF1].numa_node)
        self.assertEqual(available_counts(tracker), pool_counts(tracker))

    def test_reappearing_device_is_applied_again_with_a_pure_whitelist(self):
        tracker = new_tracker(FakeWhitelist(pure=True), world_records())
        tracker.claim_devices(INST_A, [SLOT2])
        tracker.sync(without(world_records(), SLOT2))
        self.assertTrue(device_table.is_missing(tracker.devices[SLOT2]))
        report = tracker.sync(world_records())
        self.assertEqual(((), (SLOT2,), (), ()), tuple(report))
        self.assertFalse(device_table.is_missing(tracker.devices[SLOT2]))
        self.assertEqual(available_counts(tracker), pool_counts(tracker))

    def test_reappearing_device_loses_its_flag(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [SLOT2])
        tracker.sync(without(world_records(), SLOT2))
        self.assertTrue(device_table.is_missing(tracker.devices[SLOT2]))
        tracker.pop_changes()
        report = tracker.sync(world_records())
        self.assertEqual(((), (SLOT2,), (), ()), tuple(report))
        slot = tracker.devices[SLOT2]
        self.assertFalse(device_table.is_missing(slot))
        self.assertEqual((S.CLAIMED, INST_A), (slot.status,
                                               slot.instance_uuid))
        self.assertEqual([slot], tracker.pop_changes()[0])
        # Freed now, it stays: it is on the host again.
        tracker.free_instance(INST_A)
        self.assertEqual(S.AVAILABLE, tracker.devices[SLOT2].status)

    def test_parent_that_comes_back_gets_the_status_of_its_children(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [VF1])
        tracker.allocate_instance(INST_A)
        report = tracker.sync(without(world_records(), PF))
        self.assertEqual((PF,), report.removed)
        self.assertIsNone(tracker.devices[VF1].parent_device)
        report = tracker.sync(world_records())
        self.assertEqual((PF,), report.added)
        pf = tracker.devices[PF]
        self.assertEqual(S.UNAVAILABLE, pf.status)
        self.assertIs(pf, tracker.devices[VF1].parent_device)
        self.assertEqual(available_counts(tracker), pool_counts(tracker))
        tracker.free_instance(INST_A)
        self.assertEqual(S.AVAILABLE, pf.status)

    def test_child_that_appears_under_a_parent_in_use_is_blocked(self):
        tracker = new_tracker(records=without(world_records(), VF2))
        tracker.claim_instance(INST_A, [request(dev_type=T.SRIOV_PF)])
        tracker.sync(world_records())
        self.assertEqual(S.UNCLAIMABLE, tracker.devices[VF2].status)
        self.assertEqual(available_counts(tracker), pool_counts(tracker))

    def test_tags_follow_the_whitelist(self):
        wl = FakeWhitelist()
        tracker = new_tracker(wl, world_records())
        wl.tags = {PCI: {'physical_network': 'physnet1'}}
        report = tracker.sync(world_records())
        self.assertEqual((), report.updated)   # tags are not device fields
        self.assertEqual({'physical_network': 'physnet1'},
                         tracker.tags_of(tracker.devices[PCI]))
        devs = tracker.claim_instance(
            INST_A, [request(physical_network='physnet1')])
        self.assertEqual([PCI], [d.address for d in devs])

    def test_record_with_bad_value_changes_nothing(self):
        tracker = new_tracker(records=world_records())
        before = snapshot(tracker)
        records = without(world_records(), PCI) + [
            record('0000:90:00.0', dev_type='type-XYZ')]
        err = self.assertRaises(exception.InvalidValue, tracker.sync,
                                records)
        self.assertIn('type-XYZ', str(err))
        self.assertEqual(before, snapshot(tracker))

    def test_record_without_address_is_refused(self):
        tracker = new_tracker()
        rec = record(PCI)
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
                records.append(record(pf, T.SRIOV_PF, product_id='1572'))
                for fn in range(49):
                    records.append(record(
                        '0000:%02x:%02x.%d' % (bus, 1 + fn // 8, fn % 8),
                        T.SRIOV_VF, product_id='154c', parent_addr=pf))
            tracker = manager.PciDevTracker(FakeWhitelist(), TOPOLOGY)

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
                records.append(record(pf, T.SRIOV_PF, product_id='1572'))
                records += [record('0000:%02x:01.%d' % (bus, fn),
                                   T.SRIOV_VF, product_id='154c',
                                   parent_addr=pf) for fn in range(7)]
            tracker = manager.PciDevTracker(FakeWhitelist(pure=True),
                                            TOPOLOGY)
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
        ('pci', [dict(vendor_id='8086', product_id='1520')], [PCI], {}, {}),
        ('vf', [dict(dev_type=T.SRIOV_VF)], [VF1],
         {PF: S.UNCLAIMABLE, VF2: S.AVAILABLE},
         {PF: S.UNAVAILABLE, VF2: S.AVAILABLE}),
        ('pf whole', [dict(dev_type=T.SRIOV_PF)], [PF],
         {VF1: S.UNCLAIMABLE, VF2: S.UNCLAIMABLE},
         {VF1: S.UNAVAILABLE, VF2: S.UNAVAILABLE}),
        ('mdev slot', [dict(mdev_type='nvidia-35', dev_type=T.MDEV_VF)],
         [SLOT1], {GPU: S.UNCLAIMABLE, SLOT2: S.AVAILABLE},
         {GPU: S.UNAVAILABLE, SLOT2: S.AVAILABLE}),
        ('mdev parent whole', [dict(dev_type=T.MDEV_PF, vendor_id='10de')],
         [GPU], {SLOT1: S.UNCLAIMABLE, SLOT2: S.UNCLAIMABLE},
         {SLOT1: S.UNAVAILABLE, SLOT2: S.UNAVAILABLE}),
        ('mtty slot', [dict(mdev_type='mtty-2')], [SLOT3],
         {MTTY: S.UNCLAIMABLE}, {MTTY: S.UNAVAILABLE}),
        ('two slots', [dict(mdev_type='nvidia-35', count=2)],
         [SLOT1, SLOT2], {GPU: S.UNCLAIMABLE}, {GPU: S.UNAVAILABLE}),
        ('two requests', [dict(dev_type=T.SRIOV_VF),
                          dict(mdev_type='mtty-2')],
         [VF1, SLOT3], {PF: S.UNCLAIMABLE, MTTY: S.UNCLAIMABLE},
         {PF: S.UNAVAILABLE, MTTY: S.UNAVAILABLE}),
    ]

    def test_claim_allocate_free_table(self):
        for name, specs, addrs, claimed_rel, allocated_rel in self.CASES:
            tracker = new_tracker(records=world_records())
            initial = snapshot(tracker)
            requests = [request(count=s.pop('count', 1), **s)
                        for s in [dict(s) for s in specs]]
            devs = tracker.claim_instance(INST_A, requests)
            self.assertEqual(sorted(addrs), sorted(d.address for d in devs),
                             name)
            want_ids = [r.request_id for r in requests for _ in
                        range(r.count)]
            self.assertEqual(want_ids, [d.request_id for d in devs], name)
            for dev in devs:
                self.assertEqual((S.CLAIMED, INST_A),
                                 (dev.status, dev.instance_uuid), name)
            self.assertEqual(devs, tracker.devices_of(INST_A), name)
            for address, status in claimed_rel.items():
                self.assertEqual(status, tracker.devices[address].status,
                                 name + ' ' + address)
            self.assertEqual(available_counts(tracker), pool_counts(tracker),
                             name)
            changed, _ = tracker.pop_changes()
            self.assertEqual(differing(initial, snapshot(tracker)),
                             {d.address for d in changed}, name)

            self.assertEqual(devs, tracker.allocate_instance(INST_A), name)
            self.assertEqual([], tracker.allocate_instance(INST_A), name)
            for address in addrs:
                self.assertEqual(S.ALLOCATED,
                                 tracker.devices[address].status, name)
            for address, status in allocated_rel.items():
                self.assertEqual(status, tracker.devices[address].status,
                                 name + ' ' + address)
            self.assertEqual(available_counts(tracker), pool_counts(tracker),
                             name)

            self.assertEqual(devs, tracker.free_instance(INST_A), name)
            self.assertEqual([], tracker.free_instance(INST_A), name)
            self.assertEqual([], tracker.devices_of(INST_A), name)
            after = snapshot(tracker)
            # Back as before, except the cleared request ids of course.
            self.assertEqual(initial, after, name)

    def test_request_that_does_not_fit_changes_nothing(self):
        cases = [
            ('too many slots', [request(count=3, mdev_type='nvidia-35')]),
            ('second request fails',
             [request(dev_type=T.SRIOV_VF),
              request(count=2, mdev_type='mtty-2')]),
            ('numa required', [request(mdev_type='nvidia-35',
                                       numa_policy='required')]),
        ]
        for name, requests in cases:
            tracker = new_tracker(records=world_records())
            before = snapshot(tracker)
            err = self.assertRaises(
                exception.PciDeviceRequestFailed, tracker.claim_instance,
                INST_A, requests, [TOPOLOGY.cells[0]])
            self.assertIn('alias', str(err), name)
            self.assertEqual(before, snapshot(tracker), name)
            self.assertEqual(([], []), tracker.pop_changes(), name)

    def test_numa_required_picks_the_instance_node(self):
        records = world_records() + [
            record('0000:85:00.0', T.MDEV_PF, vendor_id='10de',
                   product_id='1eb8', numa_node=0, mdev_type='nvidia-35'),
            record('4b20d080-1b54-4048-85b3-a6a62d165c09', T.MDEV_VF,
                   vendor_id='10de', product_id='1eb8', numa_node=0,
                   parent_addr='0000:85:00.0', mdev_type='nvidia-35')]
        tracker = new_tracker(records=records)
        devs = tracker.claim_instance(
            INST_A, [request(mdev_type='nvidia-35', numa_policy='required')],
            [TOPOLOGY.cells[1]])
        self.assertEqual([1], [d.numa_node for d in devs])

    def test_parent_in_use_blocks_children_and_the_reverse(self):
        # (first claim, second claim that must fail)
        cases = [
            ('pf blocks vf', dict(dev_type=T.SRIOV_PF),
             dict(dev_type=T.SRIOV_VF)),
            ('vf blocks pf', dict(dev_type=T.SRIOV_VF),
             dict(dev_type=T.SRIOV_PF)),
            ('mdev-pf blocks slot', dict(dev_type=T.MDEV_PF,
                                         vendor_id='10de'),
             dict(mdev_type='nvidia-35')),
            ('slot blocks mdev-pf', dict(mdev_type='nvidia-35'),
             dict(dev_type=T.MDEV_PF, vendor_id='10de')),
        ]
        for name, first, second in cases:
            for allocate in (False, True):
                tracker = new_tracker(records=world_records())
                tracker.claim_instance(INST_A, [request(**first)])
                if allocate:
                    tracker.allocate_instance(INST_A)
                tracker.pop_changes()
                before = snapshot(tracker)
                self.assertRaises(exception.PciDeviceRequestFailed,
                                  tracker.claim_instance, INST_B,
                                  [request(**second)])
                self.assertEqual(before, snapshot(tracker), name)
                self.assertEqual(([], []), tracker.pop_changes(), name)
                # The same through the Placement path (specific devices).
                target = {'pf blocks vf': VF2, 'vf blocks pf': PF,
                          'mdev-pf blocks slot': SLOT2,
                          'slot blocks mdev-pf': GPU}[name]
                self.assertRaises(exception.NovaPciMdevException,
                                  tracker.claim_devices, INST_B, [target])
                self.assertEqual(before, snapshot(tracker), name)
                # Freed, the second claim works.
                tracker.free_instance(INST_A)
                tracker.claim_instance(INST_B, [request(**second)])

    def test_claim_devices(self):
        tracker = new_tracker(records=world_records())
        rid = str(uuid_lib.uuid4())
        devs = tracker.claim_devices(INST_A, [SLOT2.upper()], request_id=rid)
        self.assertEqual([SLOT2], [d.address for d in devs])
        self.assertEqual((S.CLAIMED, rid), (devs[0].status,
                                            devs[0].request_id))
        self.assertEqual(S.UNCLAIMABLE, tracker.devices[GPU].status)
        self.assertEqual(available_counts(tracker), pool_counts(tracker))
        # Retrying is harmless.
        tracker.pop_changes()
        self.assertEqual(devs, tracker.claim_devices(INST_A, [SLOT2]))
        self.assertEqual(([], []), tracker.pop_changes())

    def test_transfer_keeps_status_request_ids_and_relatives(self):
        tracker = new_tracker(records=world_records())
        rid = str(uuid_lib.uuid4())
        tracker.claim_devices(INST_A, [SLOT1, SLOT2], request_id=rid)
        tracker.allocate_instance(INST_A)
        tracker.pop_changes()
        pools = pool_counts(tracker)
        moved = tracker.transfer(INST_A, INST_B)
        self.assertEqual([SLOT1, SLOT2], [d.address for d in moved])
        self.assertEqual([], tracker.devices_of(INST_A))
        self.assertEqual(moved, tracker.devices_of(INST_B))
        for dev in moved:
            self.assertEqual((S.ALLOCATED, INST_B, rid),
                             (dev.status, dev.instance_uuid, dev.request_id))
        self.assertEqual(S.UNAVAILABLE, tracker.devices[GPU].status)
        self.assertEqual(pools, pool_counts(tracker))
        changed, deleted = tracker.pop_changes()
        self.assertEqual({SLOT1, SLOT2}, {d.address for d in changed})
        self.assertEqual([], deleted)
        # Nothing to move is fine; a new owner that holds devices is not.
        self.assertEqual([], tracker.transfer(INST_A, str(uuid_lib.uuid4())))
        tracker.claim_devices(INST_A, [SLOT3])
        self.assertRaises(exception.InvalidValue, tracker.transfer,
                          INST_A, INST_B)
        self.assertEqual([SLOT3], [d.address
                                   for d in tracker.devices_of(INST_A)])

    def test_claim_devices_all_or_nothing(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_B, [SLOT3])
        tracker.pop_changes()
        before = snapshot(tracker)
        # (addresses, error)
        cases = [
            ([SLOT1, '0000:99:00.0'], exception.PciDeviceNotFound),
            ([SLOT1, SLOT3], exception.PciDeviceInvalidStatus),
            ([SLOT1, GPU], exception.PciDeviceInvalidStatus),
            ([MTTY], exception.PciDeviceInvalidStatus),
            ([VF1, 'not/an/address'], exception.InvalidPciAddress),
        ]
        for addresses, error in cases:
            self.assertRaises(error, tracker.claim_devices, INST_A,
                              addresses)
            self.assertEqual(before, snapshot(tracker), addresses)
            self.assertEqual(([], []), tracker.pop_changes())

    def test_no_device_goes_to_two_instances(self):
        tracker = new_tracker(records=world_records())
        got = {}
        for n in range(20):
            inst = str(uuid_lib.uuid4())
            try:
                devs = tracker.claim_instance(inst, [request(
                    mdev_type='nvidia-35')])
            except exception.PciDeviceRequestFailed:
                continue
            for dev in devs:
                self.assertNotIn(dev.address, got)
                got[dev.address] = inst
        self.assertEqual({SLOT1, SLOT2}, set(got))


class TestFrees(testtools.TestCase):

    def test_free_unknown_instance_is_a_noop(self):
        tracker = new_tracker(records=world_records())
        self.assertEqual([], tracker.free_instance(INST_A))
        self.assertEqual(([], []), tracker.pop_changes())

    def test_free_device(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_instance(INST_A, [request(mdev_type='nvidia-35',
                                                count=2)])
        tracker.allocate_instance(INST_A)
        tracker.pop_changes()
        before = snapshot(tracker)
        # (device, instance) pairs that must not free anything.
        for dev, inst in [(SLOT1, INST_B), (PCI, INST_A),
                          ('0000:99:00.0', INST_A)]:
            self.assertEqual([], tracker.free_device(dev, inst))
            self.assertEqual(before, snapshot(tracker))
        slot1 = tracker.devices[SLOT1]
        self.assertEqual([slot1], tracker.free_device(slot1, INST_A))
        self.assertEqual(S.UNAVAILABLE, tracker.devices[GPU].status)
        self.assertEqual([tracker.devices[SLOT2]],
                         tracker.devices_of(INST_A))
        self.assertEqual([], tracker.free_device(slot1, INST_A))
        tracker.free_device(SLOT2, INST_A)
        self.assertEqual(S.AVAILABLE, tracker.devices[GPU].status)
        self.assertEqual([], tracker.instances())
        self.assertEqual(available_counts(tracker), pool_counts(tracker))

    def test_free_claimed_and_allocated_together(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [VF1])
        tracker.allocate_instance(INST_A)
        tracker.claim_devices(INST_A, [VF2])      # e.g. resize on the host
        self.assertEqual([S.ALLOCATED, S.CLAIMED],
                         [d.status for d in tracker.devices_of(INST_A)])
        self.assertEqual(S.UNAVAILABLE, tracker.devices[PF].status)
        self.assertEqual(2, len(tracker.free_instance(INST_A)))
        self.assertEqual(S.AVAILABLE, tracker.devices[PF].status)
        self.assertEqual(available_counts(tracker), pool_counts(tracker))


class TestLoad(testtools.TestCase):

    def test_loaded_devices_rebuild_links_owners_and_pools(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [VF1, SLOT3])
        tracker.allocate_instance(INST_A)
        tracker.claim_devices(INST_B, [SLOT1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        again = manager.PciDevTracker(FakeWhitelist(), TOPOLOGY, copies)
        self.assertEqual(snapshot(tracker), snapshot(again))
        self.assertEqual(([], []), again.pop_changes())

    def test_loaded_device_no_longer_whitelisted(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [VF1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        again = manager.PciDevTracker(FakeWhitelist(excluded={VF1, VF2}),
                                      TOPOLOGY, copies)
        self.assertNotIn(VF2, again.devices)
        self.assertTrue(device_table.is_missing(again.devices[VF1]))
        changed, deleted = again.pop_changes()
        self.assertEqual([VF1], [d.address for d in changed])
        self.assertEqual([VF2], deleted)

    def test_inconsistent_free_statuses_are_repaired(self):
        tracker = new_tracker(records=world_records())
        tracker.claim_devices(INST_A, [SLOT1])
        copies = [objects.PciDevice.obj_from_primitive(d.obj_to_primitive())
                  for d in tracker.devices.values()]
        by_addr = {d.address: d for d in copies}
        by_addr[GPU].status = S.AVAILABLE       # should be unclaimable
        by_addr[PF].status = S.UNAVAILABLE      # should be available
        again = manager.PciDevTracker(FakeWhitelist(), TOPOLOGY, copies)
        self.assertEqual(statuses(tracker), statuses(again))
        self.assertEqual({GPU, PF},
                         {d.address for d in again.pop_changes()[0]})
        self.assertEqual(available_counts(again), pool_counts(again))
