"""ComputeHost on a simulated host: discovery -> claim -> spawn -> reboot.

World "two-t4" (issue 4's acceptance host)::

    NUMA 0                                   NUMA 1
    0000:3b:00.0 T4  nvidia-223 x8           0000:d8:00.0 T4  nvidia-222 x16
    0000:5e:00.0 mlx5 mlx5_core-local x16                 (2 mdevs exist)
                      -> CUSTOM_MLX5          0000:af:00.0 X710 PF + 4 VFs
    mtty (virtual)  mtty-1 x4 -> CUSTOM_MTTY
"""

import contextlib
import errno

import libvirt
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.compute import flavor
from nova_pci_mdev.compute import host as compute_mod
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import request as pci_request
from nova_pci_mdev.tests.fixtures import compute
from nova_pci_mdev.virt.libvirt import config as vconfig

objects.register_all()
S = fields.PciDeviceStatus
T = fields.PciDeviceType

EXISTING = ('0e5d8d53-6f3a-4b8e-8c3b-7f1a2d9e4c22',
            'c4a0c2a6-3b4f-4d5e-9a43-2b8b5c7e0d11')
INSTANCE = '11111111-2222-3333-4444-555555555555'
OTHER = '66666666-7777-8888-9999-000000000000'

NOVA_CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
device_spec = {"vendor_id": "15b3"}
device_spec = {"mdev_type": "mtty-*"}
device_spec = {"vendor_id": "8086", "product_id": "1572"}
device_spec = {"vendor_id": "8086", "product_id": "154c"}
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-222", "numa_policy": "required"}
alias = {"name": "gpu-whole", "vendor_id": "10de", "device_type": "mdev-pf"}
alias = {"name": "nic-vf", "vendor_id": "8086", "device_type": "type-VF"}

[devices]
enabled_mdev_types = nvidia-222, nvidia-223, mlx5_core-local, mtty-1

[mdev_nvidia-222]
device_addresses = 0000:d8:00.0

[mdev_nvidia-223]
device_addresses = 0000:3b:00.0

[mdev_mlx5_core-local]
mdev_class = mlx5

[mdev_mtty-1]
mdev_class = CUSTOM_MTTY
"""


def build_two_t4(kernel):
    gpu_types = {'nvidia-222': 16, 'nvidia-223': 8}
    kernel.add_parent('0000:3b:00.0', 0, gpu_types)
    kernel.add_parent('0000:d8:00.0', 1, gpu_types)
    kernel.add_parent('0000:5e:00.0', 0, {'mlx5_core-local': 16},
                      vendor='15b3', product='101d')
    kernel.add_parent('mtty', None, {'mtty-1': 4}, virtual=True)
    kernel.fake.add_sriov_pf('0000:af:00.0', num_vfs=4, numa_node=1)
    for uuid in EXISTING:
        kernel.add_mdev(uuid, '0000:d8:00.0', 'nvidia-222')


def validate_domain(hostdevs):
    """Define a guest with ``hostdevs`` in the REAL libvirt test driver."""
    conn = libvirt.open('test:///default')
    try:
        guest = vconfig.LibvirtConfigGuest(
            name='instance-1', uuid=INSTANCE, virt_type='test',
            devices=list(hostdevs))
        dom = conn.defineXMLFlags(guest.to_xml(),
                                  libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        return dom.XMLDesc(0)
    finally:
        conn.close()


class SaveFails(object):
    """The host's store, but recording an instance fails (disk full)."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    @contextlib.contextmanager
    def transaction(self):
        with self._store.transaction() as tx:
            yield _TxSaveFails(tx)


class _TxSaveFails(object):
    def __init__(self, tx):
        self._tx = tx

    def __getattr__(self, name):
        return getattr(self._tx, name)

    def save_instance(self, uuid, record):
        raise exception.StoreError(path='state.db', reason='disk full')


class TestComputeHost(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(compute.ComputeFixture(
            'compute-a', NOVA_CONF, build_two_t4))
        self.compute = self.host.compute

    def flavor(self, **specs):
        return flavor.parse(specs, self.compute.settings.aliases)

    def devices(self):
        return self.compute.snapshot().devices

    def by_address(self):
        return {d.address: d for d in self.devices()}

    def test_discovery_records(self):
        records = self.compute.host.discover(self.compute.settings)
        kinds = {}
        for rec in records:
            kinds.setdefault(rec['dev_type'], []).append(rec)
        self.assertEqual(4, len(kinds[T.MDEV_PF]))
        self.assertEqual(1, len(kinds[T.SRIOV_PF]))
        self.assertEqual(4, len(kinds[T.SRIOV_VF]))
        slots = {}
        for rec in kinds[T.MDEV_VF]:
            slots.setdefault((rec['parent_addr'], rec['mdev_type']),
                             []).append(rec)
        # Existing mdevs are records; slots still to create are counted
        # on their parent (issue 15).
        self.assertEqual({('0000:d8:00.0', 'nvidia-222'): 2},
                         {k: len(v) for k, v in slots.items()})
        self.assertEqual({'0000:d8:00.0': '14', '0000:3b:00.0': '8',
                          '0000:5e:00.0': '16', 'mtty': '4'},
                         {r['address']: r['extra_info'].get('creatable')
                          for r in kinds[T.MDEV_PF]})
        d8 = slots[('0000:d8:00.0', 'nvidia-222')]
        self.assertEqual(set(EXISTING), {r['address'] for r in d8
                                         if r['extra_info']['mdev_exists']
                                         == 'true'})
        self.assertTrue(all(r['numa_node'] == 1 for r in d8))

    def test_root_and_provider_uuids_are_pinned(self):
        # Literal values: the compute node's root provider and its
        # children keep their UUIDs across restarts, hosts and releases.
        tree = self.compute.provider_tree()
        self.assertEqual('c23005ec-8c5a-5e51-9f28-0b8c4ec85e87',
                         tree.root.uuid)
        self.assertEqual(tree.root.uuid, self.host.restart().root_uuid)
        self.assertEqual(
            '9c91481d-5d4a-5a86-971d-6ace03ab5fb2',
            {p.name: p.uuid for p in tree.children}[
                'compute-a_pci_0000_5e_00_0'])

    def test_provider_tree_totals(self):
        tree = self.compute.provider_tree()
        got = {p.device_address: {rc: inv.total for rc, inv in
                                  p.inventories.items()}
               for p in tree.children}
        self.assertEqual({'0000:d8:00.0': {'VGPU': 16},
                          '0000:3b:00.0': {'VGPU': 8},
                          '0000:5e:00.0': {'CUSTOM_MLX5': 16},
                          'mtty': {'CUSTOM_MTTY': 4}}, got)
        names = {p.name for p in tree.children}
        self.assertIn('compute-a_pci_0000_5e_00_0', names)

    def test_claim_creates_mdevs_and_domain_validates(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:3', 'hw:numa_nodes': '1'}))
        self.assertEqual((1,), result.numa_cells)
        addresses = [d.address for d in result.devices]
        # Existing unassigned mdevs are used before new ones are created.
        self.assertEqual(set(EXISTING), set(addresses) & set(EXISTING))
        self.assertEqual(1, len(result.created_mdevs))
        created = result.created_mdevs[0]
        self.assertEqual(('0000:d8:00.0', 'nvidia-222'),
                         self.host.tree.mdevs()[created])
        self.assertEqual(3, len(self.host.tree.mdevs()))
        xml = validate_domain(result.hostdevs)
        for address in addresses:
            self.assertIn(address, xml)
        devs = self.by_address()
        for address in addresses:
            self.assertEqual(S.ALLOCATED, devs[address].status)
            self.assertEqual(INSTANCE, devs[address].instance_uuid)
        self.assertEqual(S.UNAVAILABLE, devs['0000:d8:00.0'].status)

    def test_second_sync_changes_nothing(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:3'}))
        before = {d.address: (d.status, d.instance_uuid, d.uuid)
                  for d in self.devices()}
        report, recreated = self.compute.sync()
        self.assertEqual(((), (), (), ()), tuple(report))
        self.assertEqual([], recreated.recreated)
        after = {d.address: (d.status, d.instance_uuid, d.uuid)
                 for d in self.devices()}
        self.assertEqual(before, after)
        self.assertEqual(3, len(result.devices))

    def test_reboot_and_restart_recreate_with_same_uuid(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:3'}))
        held = {d.address for d in result.devices}
        self.host.kernel.reboot()
        self.assertEqual({}, self.host.tree.mdevs())
        compute2 = self.host.restart()
        _report, recreated = compute2.sync()
        self.assertEqual(held, set(recreated.recreated))
        self.assertEqual({u: ('0000:d8:00.0', 'nvidia-222') for u in held},
                         self.host.tree.mdevs())
        devs = {d.address: d for d in compute2.snapshot().devices}
        for address in held:
            self.assertEqual((S.ALLOCATED, INSTANCE),
                             (devs[address].status,
                              devs[address].instance_uuid))
        # A second sync after recreation changes nothing.
        report, recreated = compute2.sync()
        self.assertEqual([], recreated.recreated)
        self.assertEqual((), report.removed + report.added)

    def test_failed_mdev_creation_rolls_back_everything(self):
        before = {d.address: d.status for d in self.devices()}
        # Two mdevs to create: the second fails, the first is removed again.
        self.host.tree.fail_next('create', errno.EBUSY)
        err = self.assertRaises(
            exception.MdevError, self.compute.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'vGPU:4'}))
        self.assertIn('EBUSY', str(err))
        self.assertEqual(set(EXISTING), set(self.host.tree.mdevs()))
        self.assertEqual(before, {d.address: d.status
                                  for d in self.devices()})
        self.assertEqual({}, self.compute.snapshot().instances)

    def with_store(self, store):
        c = self.compute
        return compute_mod.ComputeHost(c.host, c.settings, store, c.mdevs,
                                       c.topology)

    def test_rollback_keeps_the_first_error_and_reports_every_undo(self):
        failing = self.with_store(SaveFails(self.compute.store))
        # One mdev to create; removing it again fails as well.
        self.host.tree.fail_next('remove', errno.EBUSY)
        err = self.assertRaises(
            exception.StoreError, failing.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'vGPU:3'}))
        self.assertIn('disk full', str(err))
        [note] = err.__notes__
        self.assertIn('rollback: mdev ', note)
        self.assertIn('left behind', note)
        self.assertIn('EBUSY', note)
        left = set(self.host.tree.mdevs()) - set(EXISTING)
        self.assertEqual(1, len(left))
        self.assertIn(left.pop(), note)
        self.assertEqual({}, self.compute.snapshot().instances)

    def test_rollback_of_a_whole_parent_reports_each_mdev_not_restored(self):
        failing = self.with_store(SaveFails(self.compute.store))
        self.host.tree.fail_next('create', errno.EIO, times=2)
        err = self.assertRaises(
            exception.StoreError, failing.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'gpu-whole:2'}))
        self.assertIn('disk full', str(err))
        self.assertEqual(
            ['rollback: mdev %s removed by this claim could not be '
             'recreated' % uuid for uuid in sorted(EXISTING)],
            [n.split(':', 2)[0] + ':' + n.split(':', 2)[1]
             for n in err.__notes__])
        self.assertTrue(all('EIO' in n for n in err.__notes__))
        self.assertEqual({}, self.host.tree.mdevs())
        self.assertEqual({}, self.compute.snapshot().instances)

    def test_views_and_dry_runs_only_read_the_host(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:3'}))
        held = sorted(d.address for d in result.devices)
        self.host.kernel.reboot()
        compute2 = self.host.restart()
        writes = list(self.host.tree.writes)
        self.assertEqual(held, sorted(compute2.snapshot().missing))
        compute2.provider_tree()
        dry = compute2.claim(OTHER, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:2,gpu-whole:1'}), dry_run=True)
        self.assertEqual(3, len(dry.devices))
        self.assertEqual(held, sorted(
            d.address for d in compute2.live_move_source(INSTANCE).devices))
        self.assertEqual(({}, writes),
                         (self.host.tree.mdevs(), self.host.tree.writes))
        # A session that may change the host recreates them.
        _report, recreated = compute2.sync()
        self.assertEqual(held, sorted(recreated.recreated))
        self.assertEqual((), compute2.snapshot().missing)

    def test_release_frees_and_keeps_mdevs(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:3'}))
        freed = self.compute.release(INSTANCE)
        self.assertEqual({d.address for d in result.devices},
                         {d.address for d in freed})
        devs = self.by_address()
        self.assertEqual(S.AVAILABLE, devs['0000:d8:00.0'].status)
        self.assertEqual(3, len(self.host.tree.mdevs()))
        self.assertEqual([], self.compute.release(INSTANCE))

    def test_numa_required_fails_cleanly_when_node_is_full(self):
        self.compute.claim(OTHER, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:16'}))
        err = self.assertRaises(
            exception.RequestNotSatisfiable, self.compute.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'vGPU:1',
                           'hw:numa_nodes': '1'}))
        self.assertIn('vGPU', str(err))
        self.assertIn('required', str(err))
        self.assertEqual({}, {u: r for u, r in
                              self.compute.snapshot().instances.items()
                              if u == INSTANCE})

    def test_whole_gpu_blocks_its_slots(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'gpu-whole:2'}))
        self.assertEqual({'0000:3b:00.0', '0000:d8:00.0'},
                         {d.address for d in result.devices})
        # The free mdevs of a GPU handed over whole are removed first.
        self.assertEqual(sorted(EXISTING), sorted(result.removed_mdevs))
        self.assertEqual({}, self.host.tree.mdevs())
        validate_domain(result.hostdevs)
        devs = self.by_address()
        for dev in devs.values():
            if dev.dev_type == T.MDEV_VF and dev.parent_addr.startswith(
                    '0000:'):
                if dev.parent_addr in ('0000:3b:00.0', '0000:d8:00.0'):
                    self.assertEqual(S.UNAVAILABLE, dev.status)
        self.assertRaises(exception.RequestNotSatisfiable,
                          self.compute.claim, OTHER,
                          self.flavor(**{'pci_passthrough:alias': 'vGPU:1'}))
        tree = self.compute.provider_tree()
        for prov in tree.children:
            if prov.device_address in ('0000:3b:00.0', '0000:d8:00.0'):
                inv = prov.inventories['VGPU']
                self.assertEqual(inv.total, inv.reserved)

    def test_a_virtual_parent_is_never_offered_whole(self):
        aliases = pci_request.AliasTable.from_config([
            '{"name": "mtty-whole", "device_type": "mdev-pf", '
            '"mdev_type": "mtty-1"}'])
        pools = self.compute.snapshot().pools
        self.assertEqual([], [p for p in pools if p.tags.get('dev_type') == T.MDEV_PF
                              and p.mdev_type == 'mtty-1'])
        exc = self.assertRaises(
            exception.RequestNotSatisfiable, self.compute.claim, INSTANCE,
            flavor.parse({'pci_passthrough:alias': 'mtty-whole:1'}, aliases))
        self.assertIn('alias mtty-whole', str(exc))
        self.assertEqual({}, self.compute.snapshot().instances)

    def test_failed_mdev_removal_restores_the_parent(self):
        before = {d.address: d.status for d in self.devices()}
        # Removing an mdev of 0000:d8:00.0 fails (a guest the tracker does
        # not know uses it): nothing is claimed, every mdev stays.
        self.host.tree.fail_next('remove', errno.EBUSY)
        err = self.assertRaises(
            exception.MdevError, self.compute.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'gpu-whole:2'}))
        self.assertIn('EBUSY', str(err))
        self.assertEqual(set(EXISTING), set(self.host.tree.mdevs()))
        self.assertEqual(before, {d.address: d.status
                                  for d in self.devices()})
        self.assertEqual({}, self.compute.snapshot().instances)

    def test_whole_gpu_refused_while_an_instance_holds_one_of_its_mdevs(self):
        self.compute.claim(OTHER, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:1'}))
        self.assertRaises(exception.RequestNotSatisfiable, self.compute.claim,
                          INSTANCE, self.flavor(**{
                              'pci_passthrough:alias': 'gpu-whole:2'}))
        self.assertLessEqual(set(EXISTING), set(self.host.tree.mdevs()))

    def test_placement_path_claims_a_slot_of_the_chosen_parent(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'resources1:CUSTOM_MLX5': '2', 'resources:VGPU': '1'}))
        parents = sorted(d.parent_addr for d in result.devices)
        self.assertEqual(3, len(parents))
        self.assertEqual(2, parents.count('0000:5e:00.0'))
        snap = self.compute.snapshot()
        mlx5 = [p for p in snap.tree.children
                if p.device_address == '0000:5e:00.0'][0]
        self.assertEqual(0, mlx5.inventories['CUSTOM_MLX5'].reserved)
        self.assertEqual(2, snap.placement_used[(mlx5.uuid, 'CUSTOM_MLX5')])

    def test_vf_alias_and_dry_run(self):
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'nic-vf:2,vGPU:1'}), dry_run=True)
        self.assertTrue(result.dry_run)
        self.assertEqual(3, len(result.devices))
        self.assertEqual((), result.created_mdevs)
        self.assertEqual({}, self.compute.snapshot().instances)
        self.assertTrue(all(d.status == S.AVAILABLE or
                            d.dev_type == T.MDEV_PF
                            for d in self.devices()))
        result = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'nic-vf:2,vGPU:1'}))
        xml = validate_domain(result.hostdevs)
        self.assertIn("type='pci'", xml)
        self.assertIn("type='mdev'", xml)
        self.assertEqual(S.UNAVAILABLE, self.by_address()[
            '0000:af:00.0'].status)

    def test_same_host_resize_confirm_and_revert(self):
        migration = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee'
        old = self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:1'}))
        new = self.compute.claim(migration, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:2,nic-vf:1'}))
        # Revert: the migration's claim goes, the instance keeps its own.
        self.compute.release(migration)
        self.assertEqual(
            {d.address for d in old.devices},
            {d.address for d in self.devices() if d.instance_uuid})
        new = self.compute.claim(migration, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:2,nic-vf:1'}))
        request_ids = {d.address: d.request_id for d in self.devices()
                       if d.instance_uuid == migration}
        err = self.assertRaises(exception.InvalidValue,
                                self.compute.confirm_move, migration,
                                INSTANCE)
        self.assertIn('release the source side', str(err))
        # Confirm: the source side (here the same host) releases first.
        self.compute.release(INSTANCE)
        mdevs = dict(self.host.tree.mdevs())
        moved = self.compute.confirm_move(migration, INSTANCE)
        self.assertEqual({d.address for d in new.devices},
                         {d.address for d in moved})
        devs = self.by_address()
        for address, request_id in request_ids.items():
            self.assertEqual(S.ALLOCATED, devs[address].status)
            self.assertEqual(INSTANCE, devs[address].instance_uuid)
            self.assertEqual(request_id, devs[address].request_id)
        self.assertEqual(S.UNAVAILABLE, devs['0000:af:00.0'].status)
        instances = self.compute.snapshot().instances
        self.assertEqual([INSTANCE], list(instances))
        self.assertEqual(3, len(instances[INSTANCE]['devices']))
        self.assertEqual(mdevs, self.host.tree.mdevs())
        # A move to a flavor without devices holds nothing to hand over.
        self.assertEqual([], self.compute.confirm_move(migration, OTHER))
        self.assertEqual([INSTANCE], list(self.compute.snapshot().instances))

    def test_same_instance_twice_is_refused(self):
        self.compute.claim(INSTANCE, self.flavor(**{
            'pci_passthrough:alias': 'vGPU:1'}))
        err = self.assertRaises(
            exception.InvalidValue, self.compute.claim, INSTANCE,
            self.flavor(**{'pci_passthrough:alias': 'vGPU:1'}))
        self.assertIn(INSTANCE, str(err))
