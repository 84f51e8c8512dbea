"""Claims and releases that load only the device trees they touch.

:meth:`ComputeHost.session` with ``narrow`` loads, when the last sync still
holds, the trees of the devices a claim's requests could take (or of the
instance a release frees) and every device in use, and adjusts the pools
the store records by what changed in them. These tests hold that path to
the one that loads every device: the same random operations on two copies
of the same random host, one with partial loads and one without, must
choose the same devices, fail with the same errors and leave the same
devices table, instance records and recorded pools; the recorded pools
must also be those a tracker of every device builds.
"""

import json
import sqlite3

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.compute import synced
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import stats as pci_stats
from nova_pci_mdev.tests.fixtures import compute
from nova_pci_mdev.virt.libvirt import records

objects.register_all()

NOVA_CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
device_spec = {"vendor_id": "8086", "product_id": "1572"}
device_spec = {"vendor_id": "8086", "product_id": "154c"}
device_spec = {"vendor_id": "144d"}
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-222", "numa_policy": "%s"}
alias = {"name": "anyGPU", "mdev_type": "nvidia-222"}
alias = {"name": "gpu-whole", "vendor_id": "10de", "device_type": "mdev-pf"}
alias = {"name": "nic-vf", "vendor_id": "8086", "device_type": "type-VF"}
alias = {"name": "nic-pf", "vendor_id": "8086", "device_type": "type-PF"}
alias = {"name": "nvme", "vendor_id": "144d", "product_id": "a808"}

[devices]
enabled_mdev_types = nvidia-222
"""

ALIASES = ('vGPU', 'anyGPU', 'gpu-whole', 'nic-vf', 'nic-pf', 'nvme')
INSTANCES = ['%08d-0000-4000-8000-000000000000' % i for i in range(4)]


def _mdev_uuid(group, index):
    return '%08x-0000-4000-8000-%012x' % (group + 1, index + 1)


@st.composite
def hosts(draw):
    """A random host: GPUs (slots to create, some mdevs existing), NICs
    with VFs, NVMe drives, on NUMA nodes 0 and 1."""
    gpus = draw(st.lists(st.tuples(st.integers(0, 1), st.integers(1, 4),
                                   st.integers(0, 4)),
                         min_size=0, max_size=3))
    nics = draw(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3)),
                         max_size=2))
    drives = draw(st.lists(st.integers(0, 1), max_size=2))
    return gpus, nics, drives


def build(spec):
    gpus, nics, drives = spec

    def _build(kernel):
        for i, (numa, instances, existing) in enumerate(gpus):
            address = '0000:%02x:00.0' % (0x10 + i)
            kernel.add_parent(address, numa, {'nvidia-222': instances})
            for j in range(min(existing, instances)):
                kernel.add_mdev(_mdev_uuid(i, j), address, 'nvidia-222')
        for i, (numa, vfs) in enumerate(nics):
            kernel.fake.add_sriov_pf('0000:%02x:00.0' % (0x40 + i),
                                     num_vfs=vfs, numa_node=numa)
        for i, numa in enumerate(drives):
            kernel.fake.add_pci('0000:%02x:00.0' % (0x80 + i),
                                numa_node=numa)
    return _build


operations = st.lists(st.one_of(
    st.tuples(st.just('claim'), st.sampled_from(INSTANCES),
              st.sampled_from(ALIASES), st.integers(1, 3),
              st.sampled_from([None, 1, 2])),
    st.tuples(st.just('release'), st.sampled_from(INSTANCES))),
    min_size=1, max_size=8)


#: Device columns a random UUID fills (a new device, a new request).
_RANDOM = ('uuid', 'request_id')


def _state(fixture):
    """What the store holds: devices (of the columns random for every new
    device or request only whether they are set), instances, recorded
    pools."""
    conn = sqlite3.connect(fixture.state_path)
    try:
        cursor = conn.execute('SELECT * FROM devices ORDER BY address')
        columns = [c[0] for c in cursor.description]
        devices = [{k: (v is not None) if k in _RANDOM else v
                    for k, v in zip(columns, row)}
                   for row in cursor.fetchall()]
        instances = conn.execute(
            'SELECT * FROM instances ORDER BY uuid').fetchall()
        pools = conn.execute("SELECT value FROM store_info WHERE key = "
                             "'pools'").fetchall()
    finally:
        conn.close()
    return devices, instances, [_pool_dicts(text) for (text,) in pools]


def _pool_dicts(text):
    primitive = json.loads(text)
    return [p['nova_object.data'] for p in
            primitive['nova_object.data']['objects']]


def _run(fixture, op):
    """The outcome of one operation: devices chosen or freed, or the
    error's class and text."""
    host = fixture.compute
    try:
        if op[0] == 'release':
            return [d.address for d in host.release(op[1])]
        _, instance, alias, count, numa_nodes = op
        specs = {'pci_passthrough:alias': '%s:%d' % (alias, count)}
        if numa_nodes is not None:
            specs['hw:numa_nodes'] = str(numa_nodes)
        flavor = flavor_mod.parse(specs, host.settings.aliases)
        return [d.address for d in host.claim(instance, flavor).devices]
    except exception.NovaPciMdevException as exc:
        return (type(exc).__name__, str(exc))


def _rebuilt_pools(fixture):
    """The pools a tracker of every stored device has (built as a
    session builds it, without a sync: a sync would record its own)."""
    host = fixture.compute
    with host.store.transaction(immediate=False) as tx:
        loaded, _instances, _busy = tx.load_state()
    tracker = manager.PciDevTracker(
        host.settings.whitelist, host.topology, loaded,
        slot_factory=records.SlotFactory(host.nodename))
    return tracker.stats.to_pool_list().obj_to_primitive()


def _recorded_pools(fixture):
    with fixture.compute.store.transaction(immediate=False) as tx:
        return tx.pools().obj_to_primitive()


class PartialSessionsAgreeTest(testtools.TestCase):

    @hypothesis.settings(max_examples=30, deadline=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(hosts(), operations,
                      st.sampled_from(['required', 'legacy', 'preferred',
                                       'socket']))
    def test_same_as_loading_every_device(self, spec, ops, policy):
        conf = NOVA_CONF % policy
        with compute.ComputeFixture('node1', conf, build(spec)) as part, \
                compute.ComputeFixture('node1', conf, build(spec),
                                       partial_loads=False) as full:
            part.compute.sync()
            full.compute.sync()
            for op in ops:
                self.assertEqual(_run(full, op), _run(part, op), op)
                self.assertEqual(_state(full), _state(part), op)
                self.assertEqual(_rebuilt_pools(part), _recorded_pools(part),
                                 op)


def _two_gpus_and_a_nic(kernel):
    kernel.add_parent('0000:10:00.0', 0, {'nvidia-222': 4})
    kernel.add_mdev(_mdev_uuid(0, 0), '0000:10:00.0', 'nvidia-222')
    kernel.add_parent('0000:11:00.0', 1, {'nvidia-222': 4})
    kernel.fake.add_sriov_pf('0000:40:00.0', num_vfs=2, numa_node=1)


class PartialSessionTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(compute.ComputeFixture(
            'node1', NOVA_CONF % 'legacy', _two_gpus_and_a_nic))
        self.compute = self.fixture.compute
        self.compute.sync()

    def flavor(self, alias, count=1):
        return flavor_mod.parse(
            {'pci_passthrough:alias': '%s:%d' % (alias, count)},
            self.compute.settings.aliases)

    def loaded(self, narrow):
        with self.compute.session(narrow=narrow) as s:
            return sorted(s.tracker.devices)

    def test_a_nic_claim_loads_the_nic_tree_only(self):
        narrow = (lambda busy: ([("lower(vendor_id) = ?", ('8086',))], ()))
        self.assertEqual(['0000:40:00.0', '0000:40:02.0', '0000:40:02.1'],
                         self.loaded(narrow))

    def test_trees_of_devices_in_use_are_loaded(self):
        gpu = self.compute.claim(INSTANCES[0], self.flavor('vGPU'))
        slot = gpu.devices[0]
        narrow = (lambda busy: ([("lower(vendor_id) = ?", ('8086',))], ()))
        loaded = self.loaded(narrow)
        self.assertIn(slot.address, loaded)
        self.assertIn(slot.parent_addr, loaded)
        self.assertNotIn('0000:11:00.0' if slot.parent_addr ==
                         '0000:10:00.0' else '0000:10:00.0', loaded)

    def test_a_release_loads_the_trees_of_its_devices(self):
        self.compute.claim(INSTANCES[0], self.flavor('nic-vf'))
        freed = self.compute.release(INSTANCES[0])
        self.assertEqual(1, len(freed))
        self.assertEqual(_rebuilt_pools(self.fixture),
                         _recorded_pools(self.fixture))

    def test_every_device_is_loaded_when_the_host_changed(self):
        self.fixture.kernel.add_mdev(_mdev_uuid(1, 0), '0000:11:00.0',
                                     'nvidia-222')
        narrow = (lambda busy: ([("lower(vendor_id) = ?", ('8086',))], ()))
        self.assertIn('0000:10:00.0', self.loaded(narrow))

    def test_every_device_is_loaded_without_recorded_pools(self):
        with self.compute.store.transaction() as tx:
            tx.forget_pools()
        narrow = (lambda busy: ([("lower(vendor_id) = ?", ('8086',))], ()))
        self.assertIn('0000:10:00.0', self.loaded(narrow))

    def test_a_failed_claim_changes_nothing(self):
        before = _state(self.fixture)
        self.assertRaises(exception.NovaPciMdevException,
                          self.compute.claim, INSTANCES[0],
                          self.flavor('vGPU', 9))
        self.assertEqual(before, _state(self.fixture))

    def test_a_claim_failing_on_the_host_changes_nothing(self):
        before = _state(self.fixture)

        def refuse(path, data):
            raise OSError(28, 'No space left on device')
        self.fixture.kernel.write = refuse
        compute_host = self.fixture.restart()
        self.assertRaises(exception.NovaPciMdevException, compute_host.claim,
                          INSTANCES[0], self.flavor('vGPU', 2))
        self.assertEqual(before, _state(self.fixture))

    def test_pools_not_of_these_devices_are_forgotten(self):
        with self.compute.store.transaction() as tx:
            tx.put_pools(pci_stats.PciDeviceStats().to_pool_list())
        self.compute.claim(INSTANCES[0], self.flavor('nic-vf'))
        with self.compute.store.transaction(immediate=False) as tx:
            self.assertIsNone(tx.pools())
        self.compute.sync()
        self.assertEqual(_rebuilt_pools(self.fixture),
                         _recorded_pools(self.fixture))


class AdjustedPoolsTest(testtools.TestCase):

    def test_counts_move_by_the_difference(self):
        pool = {'vendor_id': '10de', 'product_id': '1eb8', 'numa_node': 0,
                'mdev_type': 'nvidia-222', 'dev_type': 'mdev-vf',
                'count': 5}
        key = next(iter(pci_stats.pool_counts([pool])))
        other = key._replace(numa_node=1)
        out = pci_stats.adjusted([pool], {key: 3, other: 0},
                                 {key: 1, other: 2})
        self.assertEqual({key: 3, other: 2}, pci_stats.pool_counts(out))

    def test_a_pool_emptied_is_left_out(self):
        pool = {'vendor_id': '8086', 'product_id': '154c', 'numa_node': 1,
                'dev_type': 'type-VF', 'count': 1}
        key = next(iter(pci_stats.pool_counts([pool])))
        self.assertEqual([], list(pci_stats.adjusted([pool], {key: 1},
                                                     {key: 0})))

    def test_below_zero_is_refused(self):
        self.assertRaises(ValueError, pci_stats.adjusted, [],
                          {('k',): 1}, {('k',): 0})


class NotedTest(testtools.TestCase):

    def test_kept_names_the_missing_devices_in_use(self):
        class Dev(object):
            def __init__(self, address, missing):
                self.address = address
                self.extra_info = {'missing': 'true'} if missing else {}

        fixture = self.useFixture(compute.ComputeFixture(
            'node1', NOVA_CONF % 'legacy', _two_gpus_and_a_nic))
        host = fixture.compute
        with host.store.transaction(immediate=False) as tx:
            self.assertIsNone(synced.noted(      # no note recorded yet
                tx, [Dev('a', True)], host.host, host.vgpus, host.settings,
                []))
        host.sync()
        with host.store.transaction(immediate=False) as tx:
            done = synced.noted(tx, [Dev('a', True), Dev('b', False)],
                                host.host, host.vgpus, host.settings, [])
        self.assertEqual(('a',), done.report.kept)
