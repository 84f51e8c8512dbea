"""Properties of the tracker over random sequences of operations.

A hypothesis rule-based state machine drives one tracker on the test host
of ``test_manager`` (PCI, PF/VFs, an mdev GPU with slots, an mtty parent
with a slot) through random syncs (devices vanish and come back, leave and
re-enter the whitelist, change NUMA node), claims through the alias path
and the Placement path, allocations, frees and restarts through a real
SQLite store, and checks after every step that:

* no device is held by two instances, and the tracker's owners are exactly
  the ones the claims returned (minus the frees);
* parent/child links follow the records and every free device's status
  follows from its relatives; a parent and its child are never both in use;
* the pool counts equal the available devices, per pool key;
* nothing whitelisted is lost: every whitelisted device on the host is
  tracked, every device in use is tracked (flagged missing if it left),
  and nothing else is;
* a restart from the store gives back the same state.
"""

from hypothesis import settings
from hypothesis import stateful
from hypothesis import strategies as st
import testtools

from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.fixtures import tracker_machine
from nova_pci_mdev.tests.fixtures import tracker_world as world

S = world.S
BUSY = (S.CLAIMED, S.ALLOCATED)
INSTANCES = ('aaaaaaaa-0000-4000-8000-00000000000%d' % i for i in range(3))
INSTANCES = tuple(INSTANCES)
SPECS = (
    dict(vendor_id='8086', product_id='1520'),
    dict(dev_type='type-VF'),
    dict(dev_type='type-PF'),
    dict(mdev_type='nvidia-35'),
    dict(dev_type='mdev-pf', vendor_id='10de'),
    dict(mdev_type='mtty-2'),
    dict(dev_type='mdev-pf', mdev_type='mtty-2'),
)


def expected_status(dev):
    """A free device's status from its relatives (written independently)."""
    if dev.child_devices:
        kids = {c.status for c in dev.child_devices}
        if S.ALLOCATED in kids:
            return S.UNAVAILABLE
        return S.UNCLAIMABLE if S.CLAIMED in kids else S.AVAILABLE
    parent = dev.parent_device
    if parent is not None and parent.status == S.CLAIMED:
        return S.UNCLAIMABLE
    if parent is not None and parent.status == S.ALLOCATED:
        return S.UNAVAILABLE
    return S.AVAILABLE


def stored_state(dev):
    return (dev.status, dev.instance_uuid, dev.request_id,
            dict(dev.extra_info), dev.numa_node, dev.dev_type,
            dev.parent_addr)


class TrackerMachine(tracker_machine.TrackerMachine):

    pure = False        # the whitelist may change between syncs
    PREFIX = 'tracker-props-'
    INSTANCES = INSTANCES

    def __init__(self):
        self.whitelist = world.FakeWhitelist(pure=self.pure)
        self.records = []
        super().__init__()

    def new_tracker(self, devices=()):
        return manager.PciDevTracker(self.whitelist, world.TOPOLOGY, devices)

    def save(self):
        loaded = super().save()
        # The store holds exactly the tracker's devices: pop_changes
        # reported every change.
        assert ({d.address: stored_state(d) for d in loaded} ==
                {a: stored_state(d)
                 for a, d in self.tracker.devices.items()})

    # -- rules -------------------------------------------------------------

    @stateful.rule(present=st.one_of(st.just(frozenset(world.ALL)),
                                     st.sets(st.sampled_from(world.ALL))),
                   excluded=st.sets(st.sampled_from(world.ALL), max_size=3),
                   moved=st.booleans(), existing=st.booleans())
    def sync(self, present, excluded, moved, existing):
        records = []
        for rec in world.world_records():
            if rec['address'] not in present:
                continue
            if moved and rec['address'] == world.PCI:
                rec['numa_node'] = 1
            if existing and rec['address'] == world.SLOT2:
                rec['extra_info']['mdev_exists'] = 'true'
            records.append(rec)
        if not self.pure:
            # A pure whitelist never changes: the tracker may skip asking
            # it about records equal to the ones it applied.
            self.whitelist.excluded = set(excluded)
        self.records = records
        report = self.tracker.sync(records)
        assert set(report.kept) == {
            a for a, d in self.tracker.devices.items()
            if device_table.is_missing(d)}
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   specs=st.lists(st.sampled_from(SPECS), min_size=1,
                                  max_size=2),
                   count=st.integers(1, 2))
    def claim(self, instance, specs, count):
        requests = [world.request(count=count, **spec) for spec in specs]
        self.took(instance, self.unchanged_after(
            self.tracker.claim_instance, instance, requests))
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   addresses=st.lists(st.sampled_from(world.ALL),
                                      min_size=1, max_size=2))
    def claim_devices(self, instance, addresses):
        self.took(instance, self.unchanged_after(
            self.tracker.claim_devices, instance, addresses))
        self.save()

    @stateful.rule(instance=st.sampled_from(INSTANCES),
                   address=st.sampled_from(world.ALL))
    def free_device(self, instance, address):
        for dev in self.tracker.free_device(address, instance):
            assert self.owner.pop(dev.address) == instance
        self.save()

    # -- invariants ----------------------------------------------------------

    @stateful.invariant()
    def one_owner_per_device(self):
        devices = self.tracker.devices
        held = {a: d.instance_uuid for a, d in devices.items()
                if d.status in BUSY}
        for address, dev in devices.items():
            assert (dev.status in BUSY) == (dev.instance_uuid is not None)
        indexed = {}
        for instance in self.tracker.instances():
            for dev in self.tracker.devices_of(instance):
                assert dev.address not in indexed
                indexed[dev.address] = instance
        assert indexed == held

    @stateful.invariant()
    def relatives_consistent(self):
        devices = self.tracker.devices
        for address, dev in devices.items():
            parent = devices.get(dev.parent_addr) if dev.is_child else None
            if parent is not None and not parent.is_parent:
                parent = None
            assert dev.parent_device is parent, address
            if parent is not None:
                assert sum(c is dev for c in parent.child_devices) == 1
                assert not (dev.status in BUSY and parent.status in BUSY)
            for child in dev.child_devices:
                assert child.parent_device is dev
            if dev.status not in BUSY:
                assert dev.status == expected_status(dev), (
                    address, dev.status, expected_status(dev))

    @stateful.invariant()
    def pools_equal_available_devices(self):
        assert (world.pool_counts(self.tracker) ==
                world.available_counts(self.tracker))

    @stateful.invariant()
    def nothing_whitelisted_lost(self):
        devices = self.tracker.devices
        listed = {r['address'] for r in self.records
                  if r['address'] not in self.whitelist.excluded}
        assert listed <= set(devices), listed - set(devices)
        for address, dev in devices.items():
            if address in listed:
                assert not device_table.is_missing(dev), address
            else:
                assert dev.status in BUSY and device_table.is_missing(dev), (
                    address, dev.status)
        for rec in self.records:
            if rec['address'] in listed:
                assert devices[rec['address']].numa_node == rec['numa_node']


class PureWhitelistMachine(TrackerMachine):
    """The same rules with a whitelist that promises never to change:
    the tracker's steady-state path (equal records not looked at)."""

    pure = True


class TestTrackerProperties(testtools.TestCase):

    def test_random_sequences_pure_whitelist(self):
        stateful.run_state_machine_as_test(
            PureWhitelistMachine,
            settings=settings(max_examples=40, stateful_step_count=30,
                              deadline=None, database=None))

    def test_random_sequences(self):
        stateful.run_state_machine_as_test(
            TrackerMachine,
            settings=settings(max_examples=100, stateful_step_count=30,
                              deadline=None, database=None))
