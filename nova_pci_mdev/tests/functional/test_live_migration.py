"""Live migration of instances holding devices through a PCI alias.

Written once, run for ``(vf)`` (X710 VFs, marked ``live_migratable``),
``(mdev)`` (nvidia-35 slots) and ``(vgpu-vf)`` (L40S VFs holding nvidia-1150,
marked ``live_migratable``: PCI devices that keep their vGPU type), on the
hosts of :func:`worlds.live_pair` (libvirt 10.0.0, QEMU 8.2.2) with a real
Placement::

    host1 / host2:  cell 0: P 0000:81:00.0 + C C    cell 1: P 0000:82:00.0
                                                            + C C
    host3 (some tests, worlds.host_without_live_type): cells 0 and 1 with
          children that cannot take the move (VFs not live_migratable, or
          GPUs exposing nvidia-36 / nvidia-1160 only)

A live migration claims on the destination under the migration UUID
(``ComputeHost.claim_live_move``), rewrites the source domain's XML for the
destination's devices and defines it there; complete frees the source and
gives the claim to the instance, abort frees the destination only. After
every step :meth:`verify` checks every invariant of :mod:`.checks` on every
host that is up (owners, relatives' statuses, kernel mdevs, store records,
domains, Placement inventory and usage against the trackers) and across
hosts (no slot held twice, a consumer on one host).
"""

import json

import testscenarios

from nova_pci_mdev import exception
from nova_pci_mdev.compute import live_move
from nova_pci_mdev.objects import fields
from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds
from nova_pci_mdev.virt.libvirt import migration

load_tests = testscenarios.load_tests_apply_scenarios
Status = fields.PciDeviceStatus


def _sources(guest):
    """The host devices of a guest's hostdevs, in order."""
    return [getattr(h, 'uuid', None) or h.address for h in guest.hostdevs]


class LiveMigrationTest(base.ScenarioTestCase):
    scenarios = worlds.LIVE_SCENARIOS
    nova_conf = worlds.LIVE_NOVA_CONF
    host_args = worlds.LIVE_VERSIONS
    placement = True

    def _boot(self, count=2, **flavor):
        inst = self.cloud.boot(self.kind.flavor(count, **flavor),
                               host='host1')
        self.verify()
        return inst, self.assertHolds(self.host1, inst.uuid, count)

    def assertSameModels(self, old, new):
        self.assertEqual(
            sorted((d.dev_type, d.vendor_id, d.product_id, d.mdev_type)
                   for d in old),
            sorted((d.dev_type, d.vendor_id, d.product_id, d.mdev_type)
                   for d in new))

    def test_live_migrate_then_complete(self):
        inst, old = self._boot()
        source_xml = self.host1.domain_xml(inst.name)
        mig = self.cloud.live_migrate(inst)
        self.verify()
        self.assertEqual(('host2', cloud_mod.MIGRATING),
                         (mig.dest, inst.status))
        self.assertHolds(self.host1, inst.uuid, 2)
        new = self.assertHolds(self.host2, mig.uuid, 2)
        self.assertSameModels(old, new)
        self.assertMdevsOf(self.host2, new)
        self.assertDomain(self.host2, inst, new)
        # The destination's domain is the source's with the devices moved.
        dest_xml = self.host2.domain_xml(inst.name)
        moved = dict(zip(_sources(inst.guest), _sources(mig.guest)))
        self.assertEqual(sorted(d.address for d in old), sorted(moved))
        self.assertEqual(sorted(d.address for d in new),
                         sorted(moved.values()))
        self.assertEqual(migration.destination_xml(source_xml, moved),
                         dest_xml)
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertAllFree(self.host1)
        self.assertEqual({}, self.host1.fake.domains)
        self.assertHolds(self.host2, inst.uuid, 2)
        self.assertEqual(('host2', cloud_mod.ACTIVE),
                         (inst.host, inst.status))
        record = self.host2.compute.snapshot().instances[inst.uuid]
        self.assertNotIn('live_move', record)

    def test_and_back_again(self):
        inst, old = self._boot()
        self.cloud.live_migrate(inst)
        self.cloud.complete_live_migration(inst)
        self.verify()
        mig = self.cloud.live_migrate(inst)
        self.verify()
        self.assertEqual('host1', mig.dest)
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertAllFree(self.host2)
        back = self.assertHolds(self.host1, inst.uuid, 2)
        self.assertSameModels(old, back)

    def test_destination_without_the_type_is_refused(self):
        inst, old = self._boot()
        self.cloud.boot(self.kind.flavor(4), host='host2')
        host3 = worlds.host_without_live_type(self.cloud, self.kind)
        self.verify()
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost,
                                self.cloud.live_migrate, inst)
        self.assertEqual(['host2', 'host3'], sorted(exc.reasons))
        # host3 passes the scheduler's filter (the alias, as at boot,
        # accepts its children); the pinned claim refuses them.
        self.assertTrue(exc.reasons['host3'].startswith('claim failed: '),
                        exc.reasons['host3'])
        self.assertEqual(before, self.snapshot_all())
        self.verify()
        # The library itself refuses, whatever a scheduler thought.
        source = self.host1.compute.live_move_source(inst.uuid)
        self.assertRaises(exception.RequestNotSatisfiable,
                          host3.compute.claim_live_move,
                          'cccccccc-0000-4000-8000-000000000003', source,
                          inst.flavor)
        self.assertEqual(before, self.snapshot_all())
        self.assertEqual((cloud_mod.ACTIVE, None),
                         (inst.status, inst.migration))

    def test_destination_full_changes_nothing(self):
        inst, old = self._boot()
        self.cloud.boot(self.kind.flavor(3), host='host2')
        self.verify()
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost,
                                self.cloud.live_migrate, inst)
        self.assertEqual(['host2'], sorted(exc.reasons))
        self.assertEqual(before, self.snapshot_all())
        source = self.host1.compute.live_move_source(inst.uuid)
        exc = self.assertRaises(exception.RequestNotSatisfiable,
                                self.host2.compute.claim_live_move,
                                'cccccccc-0000-4000-8000-000000000003',
                                source, inst.flavor)
        self.assertIn(self.kind.child_alias, str(exc))
        self.assertEqual(before, self.snapshot_all())
        self.verify()

    def test_numa_required_on_the_destination(self):
        inst, old = self._boot(policy='required', numa_nodes=1)
        self.assertEqual({0}, {d.numa_node for d in old})
        # Cell 0 of host2 is used up: the instance must land on cell 1
        # with devices of cell 1, never on cell 1 with cell-0 devices.
        blocker = self.cloud.boot(self.kind.flavor(
            2, policy='required', numa_nodes=1), host='host2')
        self.assertEqual((0,), blocker.numa_cells)
        mig = self.cloud.live_migrate(inst)
        self.verify()
        new = self.assertHolds(self.host2, mig.uuid, 2)
        self.assertEqual(((1,), {1}), (mig.numa_cells,
                                       {d.numa_node for d in new}))
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertEqual((1,), inst.numa_cells)

    def test_numa_required_without_room_on_one_cell_changes_nothing(self):
        inst, old = self._boot(policy='required', numa_nodes=1)
        # One child free on each cell of host2: two in all, but not on one
        # cell, which "required" asks for.
        self.cloud.boot(self.kind.flavor(1, policy='required',
                                         numa_nodes=1), host='host2')
        self.cloud.boot(self.kind.flavor(1, policy='required',
                                         numa_nodes=1), host='host2')
        self.assertEqual(
            {0, 1}, {self.host2.devices()[a].numa_node
                     for held in self.cloud.held['host2'].values()
                     for a in held})
        before = self.snapshot_all()
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.live_migrate,
                          inst)
        self.assertEqual(before, self.snapshot_all())
        self.verify()

    def test_abort_mid_way_leaves_the_source_untouched(self):
        inst, old = self._boot()
        before = self.host_view(self.host1)
        mig = self.cloud.live_migrate(inst)
        self.verify()
        self.assertEqual(before, self.host_view(self.host1))
        self.cloud.abort_live_migration(inst)
        self.verify()
        self.assertEqual(before, self.host_view(self.host1))
        self.assertAllFree(self.host2)
        self.assertEqual({}, self.host2.fake.domains)
        self.assertEqual(('host1', cloud_mod.ACTIVE, None),
                         (inst.host, inst.status, inst.migration))
        self.assertNotIn(mig.uuid, self.host2.compute.snapshot().instances)

    def test_source_compute_restarted_during_the_move(self):
        inst, old = self._boot()
        before = self.host_view(self.host1)
        self.cloud.live_migrate(inst)
        self.verify()
        # Nova's init_host on the source: the migration is aborted.
        self.cloud.restart_service('host1')
        self.verify()
        self.assertEqual(before, self.host_view(self.host1))
        self.assertAllFree(self.host2)
        self.assertEqual((cloud_mod.ACTIVE, None),
                         (inst.status, inst.migration))
        # The instance can move again.
        self.cloud.live_migrate(inst)
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertHolds(self.host2, inst.uuid, 2)

    def test_destination_compute_restarted_during_the_move(self):
        inst, old = self._boot()
        mig = self.cloud.live_migrate(inst)
        held = self.cloud.held['host2'][mig.uuid]
        self.cloud.restart_service('host2')
        self.verify()
        self.assertEqual(sorted(held), sorted(
            d.address for d in self.assertHolds(self.host2, mig.uuid, 2)))
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertAllFree(self.host1)

    def test_too_old_a_destination_is_refused_naming_the_versions(self):
        inst, old = self._boot()
        self.cloud.boot(self.kind.flavor(4), host='host2')
        old_host = fake.FakeHost('host3', cells=2, lib_version=8005000,
                                 hv_version=8001000)
        self.kind.add_family(old_host, worlds.PARENT_0, 0, 2)
        self.cloud.add_host(old_host)
        before = self.snapshot_all()
        exc = self.assertRaises(cloud_mod.NoValidHost,
                                self.cloud.live_migrate, inst)
        self.assertIn('needs libvirt >= ', exc.reasons['host3'])
        self.assertIn('the destination host host3 has libvirt 8.5.0 and '
                      'QEMU 8.1.0', exc.reasons['host3'])
        self.assertEqual(before, self.snapshot_all())
        self.verify()


class LiveMigrationVersionTest(base.ScenarioTestCase):
    """The two hosts run Nova's default test versions (libvirt 9.0.0,
    QEMU 8.2.0): enough for mdevs, too old for VFs."""

    scenarios = worlds.LIVE_SCENARIOS
    nova_conf = worlds.LIVE_NOVA_CONF

    def test_the_source_checks_first(self):
        inst = self.cloud.boot(self.kind.flavor(1), host='host1')
        if self.kind.is_mdev:
            self.cloud.live_migrate(inst)
            self.cloud.complete_live_migration(inst)
            self.verify()
            self.assertHolds(self.host2, inst.uuid, 1)
            return
        contacts = self.host2.contacts()
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                self.cloud.live_migrate, inst)
        self.assertIn('live migration of PCI devices (vfio-pci variant '
                      'drivers) needs libvirt >= 10.0.0 and QEMU >= 8.2.2; '
                      'the source host host1 has libvirt 9.0.0 and QEMU '
                      '8.2.0', str(exc))
        self.assertNotContacted(self.host2, contacts)
        self.verify()


class LiveMigrationMovabilityTest(base.ScenarioTestCase):
    """VFs whose device spec does not say ``live_migratable`` never move
    live (worlds.NOVA_CONF); mdevs need no tag."""

    scenarios = [('vf', {'kind': worlds.VF})]
    host_args = worlds.LIVE_VERSIONS

    def test_a_vf_without_live_migratable_is_refused_at_the_source(self):
        inst = self.cloud.boot(self.kind.flavor(1), host='host1')
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                self.cloud.live_migrate, inst)
        self.assertIn('of alias vf is not live-migratable', str(exc))
        self.verify()


class TestDriverLiveMigrationTest(base.ScenarioTestCase):
    """libvirt's own test driver reports hypervisor TEST: it cannot
    migrate devices, and the real library says so."""

    scenarios = [('mdev-libvirt', {'kind': worlds.MDEV_LIBVIRT})]

    def test_refused_naming_the_hypervisor(self):
        inst = self.cloud.boot(self.kind.flavor(1), host='host1')
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                self.cloud.live_migrate, inst)
        self.assertIn('the source host host1 has libvirt ', str(exc))
        self.assertIn('and hypervisor TEST ', str(exc))
        self.assertIn('(not QEMU)', str(exc))
        self.verify()


class PlacementPathLiveMigrationTest(base.CloudTestCase):
    """Slots of the Placement path (``resources:VGPU=1``, Nova's own vGPU
    live migration) move too: Placement allocates on the destination for
    the migration, the slot keeps its type, and Placement's usage follows
    the trackers at every step (:func:`worlds.gpu_pair`, libvirt 9.0.0 /
    QEMU 8.2.0: new enough for mdevs)."""

    placement = True

    def setUp(self):
        super().setUp()
        self.hosts = worlds.gpu_pair(self.cloud)

    def test_move_then_complete_then_abort_the_way_back(self):
        inst = self.cloud.boot({'resources:VGPU': '1',
                                'resources1:CUSTOM_MLX5': '1'},
                               host='gpuhost1')
        self.verify()
        mig = self.cloud.live_migrate(inst)
        self.verify()
        dest = self.cloud.hosts['gpuhost2'].devices()
        self.assertEqual(['mlx5_core-local', 'nvidia-35'], sorted(
            dest[a].mdev_type for a in mig.devices))
        self.assertEqual(2, len(self.cloud.client.get_allocations(
            mig.uuid)['allocations']))
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertEqual({}, self.cloud.client.get_allocations(
            mig.uuid)['allocations'])
        back = self.cloud.live_migrate(inst)
        self.verify()
        self.cloud.abort_live_migration(inst)
        self.verify()
        self.assertEqual({}, self.cloud.client.get_allocations(
            back.uuid)['allocations'])
        self.assertEqual('gpuhost2', inst.host)

    def test_an_allocation_of_another_type_is_refused(self):
        inst = self.cloud.boot({'resources:VGPU': '1'}, host='gpuhost1')
        src, dst = self.hosts
        source = src.compute.live_move_source(inst.uuid)
        before = self.snapshot_all()
        mlx5 = [p.uuid for p in dst.compute.provider_tree().children
                if 'CUSTOM_MLX5' in p.inventories]
        exc = self.assertRaises(
            exception.LiveMigrationRefused, dst.compute.claim_live_move,
            'cccccccc-0000-4000-8000-000000000003', source, inst.flavor,
            allocations={mlx5[0]: {'VGPU': 1, 'CUSTOM_MLX5': 1}})
        self.assertIn('gives 0 slot(s) of nvidia-35 for 1 source slot',
                      str(exc))
        self.assertEqual(before, self.snapshot_all())


class VgpuVfPlacementLiveMigrationTest(base.CloudTestCase):
    """NVIDIA vGPU VFs taken through the Placement path
    (``resources:VGPU=1``) move too, keeping their vGPU type: on
    :func:`worlds.live_pair` of L40S GPUs (VFs live-migratable), with a
    real Placement and with the destination's local choice."""

    placement = True
    nova_conf = worlds.LIVE_NOVA_CONF

    def setUp(self):
        super().setUp()
        self.src, self.dst = worlds.live_pair(self.cloud, worlds.VGPU_VF)

    def test_move_then_complete(self):
        inst = self.cloud.boot({'resources:VGPU': '1'}, host='host1')
        mig = self.cloud.live_migrate(inst)
        self.verify()
        (address,) = mig.devices
        self.assertEqual({address: 1150}, self.dst.vgpu_types())
        self.cloud.complete_live_migration(inst)
        self.verify()
        self.assertEqual(({}, {address: 1150}), (self.src.vgpu_types(),
                                                 self.dst.vgpu_types()))

    def test_the_local_choice_keeps_the_type(self):
        inst = self.cloud.boot({'resources:VGPU': '1'}, host='host1')
        source = self.src.compute.live_move_source(inst.uuid)
        moved = self.dst.compute.claim_live_move(
            'cccccccc-0000-4000-8000-000000000003', source, inst.flavor,
            dry_run=True)
        (dev,) = moved.devices
        self.assertEqual(('type-VF', 'nvidia-1150'), (dev.dev_type,
                                                      dev.mdev_type))


class LiveMoveAPITest(base.ScenarioTestCase):
    """ComputeHost's live-move operations called directly (what a Nova
    driver would call), on the live pair."""

    scenarios = worlds.LIVE_SCENARIOS
    nova_conf = worlds.LIVE_NOVA_CONF
    host_args = worlds.LIVE_VERSIONS
    MIG = 'cccccccc-0000-4000-8000-000000000003'

    def setUp(self):
        super().setUp()
        self.inst = self.cloud.boot(self.kind.flavor(2), host='host1')
        self.source = self.host1.compute.live_move_source(self.inst.uuid)

    def test_the_source_lists_what_the_instance_holds(self):
        held = self.cloud.held['host1'][self.inst.uuid]
        self.assertEqual(
            (self.inst.uuid, 'host1', ((10, 0, 0), 'QEMU', (8, 2, 2))),
            (self.source.instance_uuid, self.source.host,
             (self.source.versions.libvirt,
              self.source.versions.hypervisor_type,
              self.source.versions.hypervisor)))
        self.assertEqual(sorted(held),
                         sorted(d.address for d in self.source.devices))
        self.assertEqual({(0, self.kind.child_alias)},
                         {(d.request, d.alias) for d in self.source.devices})

    def test_dry_run_changes_nothing(self):
        before = self.snapshot_all()
        moved = self.host2.compute.claim_live_move(
            self.MIG, self.source, self.inst.flavor, dry_run=True)
        self.assertEqual(sorted(d.address for d in self.source.devices),
                         sorted(moved.mapping))
        self.assertTrue(moved.claim.dry_run)
        self.assertEqual(before, self.snapshot_all())

    def test_the_move_survives_a_json_round_trip(self):
        text = json.dumps(self.source.to_dict())
        source = live_move.MoveSource.from_dict(json.loads(text))
        self.assertEqual(self.source, source)
        moved = self.host2.compute.claim_live_move(self.MIG, source,
                                                   self.inst.flavor)
        record = self.host2.compute.snapshot().instances[self.MIG]
        self.assertEqual({'instance_uuid': self.inst.uuid,
                          'source_host': 'host1',
                          'mapping': moved.mapping}, record['live_move'])
        self.host2.compute.release(self.MIG)
        self.assertAllFree(self.host2)

    def test_a_move_to_the_same_host_is_refused(self):
        exc = self.assertRaises(exception.InvalidValue,
                                self.host1.compute.claim_live_move,
                                self.MIG, self.source, self.inst.flavor)
        self.assertIn('a live move goes to another host', str(exc))

    def test_a_flavor_that_does_not_match_is_refused(self):
        before = self.snapshot_all()
        exc = self.assertRaises(
            exception.InvalidValue, self.host2.compute.claim_live_move,
            self.MIG, self.source, self.cloud.parse(self.kind.flavor(1)))
        self.assertIn('asks for 1 device(s), the instance holds 2',
                      str(exc))
        self.assertEqual(before, self.snapshot_all())

    def test_bad_move_sources_name_the_field(self):
        good = self.source.to_dict()
        for change, field in [
                ({'host': ''}, 'move source host'),
                ({'devices': {}}, 'move source devices'),
                ({'instance_uuid': 'x'}, 'instance UUID'),
                ({'versions': {'libvirt': [10, 0, 0]}}, 'versions'),
                ({'devices': [dict(good['devices'][0], request='0')]},
                 'devices[0].request'),
                ({'extra': 1}, 'move source'),
                # One device twice (in another case too): it would get two
                # destination devices and map to one (issue 31).
                ({'devices': [good['devices'][0], dict(
                    good['devices'][0],
                    address=good['devices'][0]['address'].upper())]},
                 'move source devices[1].address')]:
            exc = self.assertRaises(exception.InvalidValue,
                                    live_move.MoveSource.from_dict,
                                    dict(good, **change))
            self.assertIn(field, str(exc))


class WholeParentLiveMigrationTest(base.ScenarioTestCase):
    """A GPU or PF passed through whole has no vfio-pci variant driver
    here (its device spec does not say live_migratable): refused at the
    source, whatever the destination."""

    scenarios = worlds.LIVE_WHOLE_SCENARIOS
    nova_conf = worlds.LIVE_NOVA_CONF
    host_args = worlds.LIVE_VERSIONS

    def test_refused(self):
        inst = self.cloud.boot(self.kind.flavor(1, whole=True),
                               host='host1')
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                self.cloud.live_migrate, inst)
        self.assertIn('%s 0000:8' % self.kind.parent_type, str(exc))
        self.assertIn('is not live-migratable', str(exc))
        self.verify()
