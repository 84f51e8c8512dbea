"""Three levels (issue 13): PF -> VF parent (``mdev-pf``) -> mdev slot.

On NVIDIA Ampere and later every VF of a GPU is itself an mdev parent. The
host::

    0000:41:00.0  type-PF   (the GPU, passable whole)
      |- 0000:41:00.4  mdev-pf nvidia-A   '- SLOT_A (existing mdev)
      |- 0000:41:00.5  mdev-pf nvidia-A   (one slot still to create)
      '- 0000:41:00.6  type-VF            (a plain VF)

A hypothesis state machine claims whole PFs, VF parents, slots and plain
VFs, by request and by address, allocates, frees and restarts through a
real store, and checks after every step, with rules written here
independently of the tracker:

* no device is held twice, and the owners are those the claims returned;
* a PF in use has nothing in use below it; a VF parent in use has no slot
  in use and its PF is not in use; a slot in use has neither its VF parent
  nor its PF in use;
* every free device's status follows from its ancestors and descendants;
* the pools count exactly the claimable devices and slots still to create
  (a PF is in them only while nothing below it is in use, nothing below
  a PF in use is); when nothing is held, everything is free again.
"""

import os
import shutil
import tempfile

from hypothesis import stateful
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.pci import manager
from nova_pci_mdev.store import sqlite as store_lib
from nova_pci_mdev.tests.fixtures import pools_rebuilt
from nova_pci_mdev.tests.unit.pci import test_manager as world
from nova_pci_mdev.virt.libvirt import records as records_mod

S = world.S
T = world.T
BUSY = (S.CLAIMED, S.ALLOCATED)
NODE = 'ampere-1'
PF = '0000:41:00.0'
VFP_A = '0000:41:00.4'
VFP_B = '0000:41:00.5'
VF = '0000:41:00.6'
SLOT_A = '5d2c1f40-0000-4000-8000-0000000000a1'
GPU = dict(vendor_id='10de', product_id='2236', numa_node=0)
INSTANCES = tuple('cccccccc-0000-4000-8000-00000000000%d' % i
                  for i in range(1, 4))
REQUESTS = (
    dict(dev_type=T.SRIOV_PF, vendor_id='10de'),
    dict(dev_type=T.MDEV_PF, vendor_id='10de'),
    dict(mdev_type='nvidia-A'),
    dict(dev_type=T.SRIOV_VF, vendor_id='10de'),
)


def host_records():
    return [
        world.record(PF, T.SRIOV_PF, **GPU),
        world.record(VFP_A, T.MDEV_PF, parent_addr=PF, mdev_type='nvidia-A',
                     phys_function=PF, **GPU),
        world.record(SLOT_A, T.MDEV_VF, parent_addr=VFP_A,
                     mdev_type='nvidia-A', mdev_exists='true',
                     mdev_exposed='true', **GPU),
        world.record(VFP_B, T.MDEV_PF, parent_addr=PF, mdev_type='nvidia-A',
                     phys_function=PF, creatable='1', **GPU),
        world.record(VF, T.SRIOV_VF, parent_addr=PF, **GPU),
    ]


BASE = frozenset(r['address'] for r in host_records())


def ancestors(devices, dev):
    out = []
    parent = devices.get(dev.parent_addr) if dev.parent_addr else None
    while parent is not None:
        out.append(parent)
        parent = (devices.get(parent.parent_addr) if parent.parent_addr
                  else None)
    return out


def descendants(devices, dev):
    below = [d for d in devices.values() if d.parent_addr == dev.address]
    for child in list(below):
        below.extend(descendants(devices, child))
    return below


def expected_status(devices, dev):
    up = {a.status for a in ancestors(devices, dev)}
    down = {d.status for d in descendants(devices, dev)}
    if S.ALLOCATED in up:
        return S.UNAVAILABLE
    if S.CLAIMED in up:
        return S.UNCLAIMABLE
    if S.ALLOCATED in down:
        return S.UNAVAILABLE
    if S.CLAIMED in down:
        return S.UNCLAIMABLE
    return S.AVAILABLE


def new_tracker(devices=()):
    return manager.PciDevTracker(
        world.FakeWhitelist(), world.TOPOLOGY, devices,
        slot_factory=records_mod.SlotFactory(NODE))


class ThreeLevelMachine(stateful.RuleBasedStateMachine):

    def __init__(self):
        super().__init__()
        shm = '/dev/shm'
        self.dir = tempfile.mkdtemp(
            prefix='three-levels-',
            dir=shm if os.access(shm, os.W_OK) else None)
        self.store = store_lib.SqliteStore(os.path.join(self.dir, 'db'))
        self.tracker = new_tracker()
        self.tracker.sync(host_records())
        self.owner = {}
        self.made = set()
        self.save()

    def teardown(self):
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def save(self):
        changed, deleted = self.tracker.pop_changes()
        with self.store.transaction() as tx:
            tx.save_devices(changed)
            tx.delete_devices(deleted)

    def took(self, instance, devs):
        for dev in devs or ():
            assert self.owner.get(dev.address, instance) == instance, (
                '%s handed to %s while %s holds it'
                % (dev.address, instance, self.owner[dev.address]))
            self.owner[dev.address] = instance
            if dev.address not in BASE:
                self.made.add(dev.address)

    def attempt(self, call, *args):
        before = world.snapshot(self.tracker)
        try:
            return call(*args)
        except exception.NovaPciMdevException:
            assert world.snapshot(self.tracker) == before
            return None

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   spec=st.sampled_from(REQUESTS), count=st.integers(1, 2))
    def claim(self, instance, spec, count):
        self.took(instance, self.attempt(
            self.tracker.claim_instance, instance,
            [world.request(count=count, **spec)]))
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   address=st.sampled_from((PF, VFP_A, VFP_B, VF, SLOT_A)))
    def claim_address(self, instance, address):
        self.took(instance, self.attempt(
            self.tracker.claim_devices, instance, [address]))
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   parent=st.sampled_from((VFP_A, VFP_B)))
    def claim_slot_of(self, instance, parent):
        self.took(instance, self.attempt(
            self.tracker.claim_slots, instance, parent, 1))
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES))
    def allocate(self, instance):
        self.tracker.allocate_instance(instance)
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES))
    def free(self, instance):
        for dev in self.tracker.free_instance(instance):
            assert self.owner.pop(dev.address) == instance
        self.save()

    @stateful.rule()
    def sync(self):
        self.tracker.sync(self.host_now())
        self.save()

    @stateful.rule()
    def restart(self):
        before = world.snapshot(self.tracker)
        with self.store.transaction() as tx:
            loaded = tx.load_devices()
        self.tracker = new_tracker(loaded)
        assert world.snapshot(self.tracker) == before
        self.tracker.sync(self.host_now())
        self.save()

    def host_now(self):
        """What discovery reports now: the slots claims made have their
        mdev (the claim created it; a free one stays for reuse) and
        0000:41:00.5 can create that many fewer."""
        records = host_records()
        for address in sorted(self.made):
            records.append(world.record(
                address, T.MDEV_VF, parent_addr=VFP_B, mdev_type='nvidia-A',
                mdev_exists='true', mdev_exposed='true', **GPU))
        for record in records:
            if record['address'] == VFP_B and self.made:
                record['extra_info'].pop('creatable')
        return records

    @stateful.invariant()
    def one_owner(self):
        held = {a: d.instance_uuid for a, d in self.tracker.devices.items()
                if d.status in BUSY}
        assert held == self.owner, (held, self.owner)

    @stateful.invariant()
    def levels_exclude_each_other(self):
        devices = self.tracker.devices
        for dev in devices.values():
            if dev.status not in BUSY:
                assert dev.status == expected_status(devices, dev), (
                    dev.address, dev.status, expected_status(devices, dev))
                continue
            for relative in (ancestors(devices, dev)
                             + descendants(devices, dev)):
                assert relative.status not in BUSY, (
                    '%s and its relative %s are both in use'
                    % (dev.address, relative.address))

    @stateful.invariant()
    def pools_as_rebuilt(self):
        # Claims and frees refresh only what moved (test_claim_walks).
        assert (pools_rebuilt.rebuilt_places(self.tracker) ==
                pools_rebuilt.places(self.tracker.stats))

    @stateful.invariant()
    def pools_count_what_can_be_claimed(self):
        devices = self.tracker.devices
        counts = world.pool_counts(self.tracker)
        claimable = {}
        for dev in devices.values():
            if dev.status == S.AVAILABLE:
                key = (dev.vendor_id, dev.product_id, dev.dev_type,
                       dev.mdev_type, dev.numa_node)
                claimable[key] = claimable.get(key, 0) + 1
        for dev in devices.values():
            if dev.dev_type != T.MDEV_PF or not capacity.creatable(dev):
                continue
            blocked = dev.status in BUSY or any(
                a.status in BUSY for a in ancestors(devices, dev))
            if not blocked:
                key = (dev.vendor_id, dev.product_id, T.MDEV_VF,
                       dev.mdev_type, dev.numa_node)
                claimable[key] = claimable.get(key, 0) + capacity.creatable(
                    dev)
        assert counts == claimable, (counts, claimable)
        if not self.owner:
            assert {d.status for d in devices.values()} == {S.AVAILABLE}


class ThreeLevelTest(testtools.TestCase):

    def test_pf_whole_waits_for_every_vf_and_slot(self):
        tracker = new_tracker()
        tracker.sync(host_records())
        tracker.claim_devices(INSTANCES[0], [SLOT_A])
        self.assertRaises(exception.NovaPciMdevException,
                          tracker.claim_devices, INSTANCES[1], [PF])
        self.assertEqual(S.UNCLAIMABLE, tracker.devices[PF].status)
        tracker.free_instance(INSTANCES[0])
        tracker.claim_devices(INSTANCES[1], [PF])
        for address in (VFP_A, VFP_B, VF, SLOT_A):
            self.assertEqual(S.UNCLAIMABLE, tracker.devices[address].status)
        self.assertEqual(0, capacity.usable(tracker.devices[VFP_B]))
        self.assertRaises(exception.NovaPciMdevException,
                          tracker.claim_slots, INSTANCES[2], VFP_B, 1)


class ThreeLevelRecordsTest(testtools.TestCase):

    def test_an_mdev_capable_vf_sits_below_its_pf(self):
        from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
        from nova_pci_mdev.tests.unit.virt.libvirt import test_host
        from nova_pci_mdev.virt.libvirt import nodedev
        vf = X.pci(VFP_A, vendor='10de', product='2236', numa=0,
                   parent=X.node_name(PF), extra=(
                       "<capability type='phys_function'>%s</capability>%s"
                       % (X.address_attrs(PF),
                          X.mdev_types(('nvidia-A', None, 1)))))
        devices = [nodedev.parse_node_device(x) for x in (
            X.pf(PF, [VFP_A], vendor='10de', product='2236', numa=0), vf)]
        found = {r['address']: r for r in records_mod.build_records(
            NODE, devices, test_host.StubSettings(
                test_host.Options('nvidia-A')))}
        self.assertEqual((T.MDEV_PF, PF, PF),
                         (found[VFP_A]['dev_type'],
                          found[VFP_A]['parent_addr'],
                          found[VFP_A]['extra_info']['phys_function']))
        tracker = new_tracker()
        tracker.sync(list(found.values()))
        self.assertIs(tracker.devices[PF], tracker.devices[VFP_A]
                      .parent_device)
