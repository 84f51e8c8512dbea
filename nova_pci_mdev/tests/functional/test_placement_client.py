"""PlacementClient against a real OpenStack Placement (in process).

The host drawn by these tests::

    host1 (root; VCPU 8 when a test asks)
      +-- host1_pci_0000_84_00_0   VGPU: 4         nvidia-222 parent
      |                            CUSTOM_MDEV_TYPE_NVIDIA_222
      +-- host1_pci_0000_85_00_2   CUSTOM_MLX5: 3  mlx5 parent
                                   CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL
"""

import uuid as uuid_lib

import fixtures
import requests
import testtools

from nova_pci_mdev import conf
from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import placement
from nova_pci_mdev.tests.fixtures import placement as placement_fixture
from nova_pci_mdev.tests.fixtures import placement_client

ROOT = '3d5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f'
NODE = 'host1'
GPU_NAME = 'host1_pci_0000_84_00_0'
MLX_NAME = 'host1_pci_0000_85_00_2'
GPU = placement.provider_uuid(GPU_NAME)
MLX = placement.provider_uuid(MLX_NAME)
PROJECT = 'a1a1a1a1-0000-4000-8000-00000000000a'
USER = 'b2b2b2b2-0000-4000-8000-00000000000b'
GPU_TRAIT = 'CUSTOM_MDEV_TYPE_NVIDIA_222'
MLX_TRAIT = 'CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL'


def make_tree(gpu=(4, 0), mlx=(3, 0), root_inventories=None):
    """The drawn host; ``gpu``/``mlx`` are (total, reserved) or None."""
    children = []
    for name, spec, rc, mdev_type in ((GPU_NAME, gpu, 'VGPU', 'nvidia-222'),
                                      (MLX_NAME, mlx, 'CUSTOM_MLX5',
                                       'mlx5_core-local')):
        if spec is None:
            continue
        total, reserved = spec
        children.append(placement.Provider(
            name=name, uuid=placement.provider_uuid(name), parent_uuid=ROOT,
            inventories={rc: placement.Inventory(total=total,
                                                 reserved=reserved)},
            traits=frozenset(
                [placement.resource_class_trait_name(mdev_type)])))
    root = placement.Provider(name=NODE, uuid=ROOT, inventories={
        rc: placement.Inventory(total=n)
        for rc, n in (root_inventories or {}).items()})
    return placement.ProviderTree(root=root, children=tuple(children))


DRAWN = (('0000:84:00.0', 'nvidia-222', 'VGPU', 4),
         ('0000:85:00.2', 'mlx5_core-local', 'CUSTOM_MLX5', 3))


def tracker_devices(parents=DRAWN):
    """PciDevice objects of ``parents`` ((address, mdev_type, resource
    class, slots)), as the tracker holds them; the drawn host by default."""
    devices = []
    for addr, mdev_type, rc, count in parents:
        devices.append(pci_device.PciDevice.create({
            'address': addr, 'vendor_id': '10de', 'product_id': '1eb8',
            'dev_type': fields.PciDeviceType.MDEV_PF, 'numa_node': 0,
            'mdev_type': mdev_type, 'label': 'label_10de_1eb8',
            'dev_id': 'pci_' + addr.replace(':', '_').replace('.', '_'),
            'extra_info': {'resource_class': rc}}))
        for _ in range(count):
            devices.append(pci_device.PciDevice.create({
                'address': str(uuid_lib.uuid4()), 'vendor_id': '10de',
                'product_id': '1eb8',
                'dev_type': fields.PciDeviceType.MDEV_VF, 'numa_node': 0,
                'parent_addr': addr, 'mdev_type': mdev_type,
                'label': 'label_10de_1eb8', 'dev_id': None,
                'extra_info': {}}))
    return devices


class GenerationBumpingSession(requests.Session):
    """A real session that lets another client write first.

    Before each of the next ``bumps`` PUTs of a provider's inventories it
    toggles a trait of that provider through ``other`` (a second client),
    which moves the provider generation the first client has just read:
    Placement then answers a real 409 generation conflict.
    """

    def __init__(self, placement, other, bumps):
        super().__init__()
        self.placement = placement
        self.other = other
        self.bumps = bumps
        self.bumped = 0

    def request(self, method, url, *args, **kwargs):
        if (method == 'PUT' and url.endswith('/inventories')
                and self.bumped < self.bumps):
            uuid = url.rsplit('/', 2)[-2]
            self.placement.write('PUT', '/traits/CUSTOM_BUMP')
            generation, traits = self.other.traits(uuid)
            self.placement.write(
                'PUT', '/resource_providers/%s/traits' % uuid,
                {'resource_provider_generation': generation,
                 'traits': sorted(traits ^ {'CUSTOM_BUMP'})})
            self.bumped += 1
        return super().request(method, url, *args, **kwargs)


class RefusingSession(requests.Session):
    """A session whose every request fails to connect (no socket opened)."""

    def request(self, method, url, *args, **kwargs):
        raise requests.ConnectionError('connection refused: %s' % url)


class CountingSession(requests.Session):
    """A real session that records (method, path, params) of requests."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def request(self, method, url, *args, **kwargs):
        self.calls.append((method, url.split('/placement', 1)[1],
                           kwargs.get('params')))
        return super().request(method, url, *args, **kwargs)


class PlacementTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # Placement's and the client's warnings ("over-capacity", "left the
        # host but is kept") are the stories' subject: kept for the tests.
        self.logger = self.useFixture(fixtures.FakeLogger())
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        self.client = self.placement.client

    def generations(self):
        return {p['name']: p['generation']
                for p in self.client.providers(in_tree=ROOT)}

    def inventory(self, uuid, rc):
        return self.client.inventories(uuid)[1][rc]

    def consume(self, provider, rc, amount=1):
        consumer = str(uuid_lib.uuid4())
        self.client.claim(consumer, {'allocations': {
            provider: {'resources': {rc: amount}}}}, PROJECT, USER)
        return consumer


class SyncTreeTest(PlacementTestCase):

    def test_sync_creates_the_tree(self):
        report = self.client.sync_tree(make_tree())
        self.assertEqual([NODE, GPU_NAME, MLX_NAME], report.created)
        providers = {p['uuid']: p for p in self.client.providers(ROOT)}
        self.assertEqual({ROOT, GPU, MLX}, set(providers))
        for uuid in (GPU, MLX):
            self.assertEqual(ROOT, providers[uuid]['parent_provider_uuid'])
        self.assertEqual({'total': 4, 'reserved': 0, 'min_unit': 1,
                          'max_unit': 4, 'step_size': 1,
                          'allocation_ratio': 1.0},
                         self.inventory(GPU, 'VGPU'))
        self.assertEqual(3, self.inventory(MLX, 'CUSTOM_MLX5')['total'])
        self.assertEqual({GPU_TRAIT}, self.client.traits(GPU)[1])
        self.assertEqual({MLX_TRAIT}, self.client.traits(MLX)[1])
        self.assertEqual((0, {}), self.client.inventories(ROOT))

    def test_second_sync_is_a_no_op(self):
        tree = make_tree(root_inventories={'VCPU': 8})
        self.client.sync_tree(tree)
        before = self.generations()
        report = self.client.sync_tree(tree)
        self.assertFalse(report.changed, report)
        self.assertEqual(0, report.retries)
        self.assertEqual({}, report.kept)
        self.assertEqual(before, self.generations())

    def test_no_op_sync_costs_one_get(self):
        session = CountingSession()
        client = self.placement.new_client(session=session)
        client.sync_tree(make_tree())
        del session.calls[:]
        self.assertFalse(client.sync_tree(make_tree()).changed)
        self.assertEqual(
            [('GET', '/resource_providers', {'in_tree': ROOT})],
            session.calls)

    def test_fresh_client_sync_is_a_no_op(self):
        self.client.sync_tree(make_tree())
        before = self.generations()
        report = self.placement.new_client().sync_tree(make_tree())
        self.assertFalse(report.changed, report)
        self.assertEqual(before, self.generations())

    def test_change_by_someone_else_is_repaired(self):
        self.client.sync_tree(make_tree())
        generation, _ = self.client.inventories(GPU)
        self.placement.write('PUT', '/resource_providers/%s/inventories'
                             % GPU, {'resource_provider_generation':
                                     generation,
                                     'inventories': {'VGPU': {'total': 9}}})
        self.assertEqual(9, self.inventory(GPU, 'VGPU')['total'])
        report = self.client.sync_tree(make_tree())
        self.assertEqual([GPU_NAME], report.updated)
        self.assertEqual(4, self.inventory(GPU, 'VGPU')['total'])

    def test_changed_inventory_is_written(self):
        self.client.sync_tree(make_tree())
        before = self.generations()
        report = self.client.sync_tree(make_tree(gpu=(5, 2)))
        self.assertEqual([GPU_NAME], report.updated)
        self.assertEqual((5, 2, 5), tuple(
            self.inventory(GPU, 'VGPU')[k]
            for k in ('total', 'reserved', 'max_unit')))
        after = self.generations()
        self.assertGreater(after[GPU_NAME], before[GPU_NAME])
        self.assertEqual(before[MLX_NAME], after[MLX_NAME])

    def test_root_inventory_and_traits_are_merged(self):
        self.client.sync_tree(make_tree(root_inventories={'VCPU': 8}))
        generation, _ = self.client.inventories(ROOT)
        self.placement.write(
            'PUT', '/resource_providers/%s/inventories' % ROOT,
            {'resource_provider_generation': generation,
             'inventories': {'VCPU': {'total': 8},
                             'MEMORY_MB': {'total': 1024}}})
        self.client.sync_tree(make_tree(root_inventories={'VCPU': 16}))
        inventories = self.client.inventories(ROOT)[1]
        self.assertEqual(16, inventories['VCPU']['total'])
        self.assertEqual(1024, inventories['MEMORY_MB']['total'])

    def test_child_without_slots_drops_its_inventory(self):
        self.client.sync_tree(make_tree())
        tree = make_tree()
        empty = tree.children[0].__class__(
            name=GPU_NAME, uuid=GPU, parent_uuid=ROOT,
            traits=frozenset([GPU_TRAIT]))
        report = self.client.sync_tree(placement.ProviderTree(
            tree.root, (empty, tree.children[1])))
        self.assertEqual([GPU_NAME], report.updated)
        self.assertEqual({}, self.client.inventories(GPU)[1])

    def test_gone_provider_is_deleted_when_empty(self):
        self.client.sync_tree(make_tree())
        report = self.client.sync_tree(make_tree(mlx=None))
        self.assertEqual([MLX_NAME], report.deleted)
        self.assertIsNone(self.client.provider(MLX))
        self.assertIsNotNone(self.client.provider(GPU))

    def test_gone_provider_with_allocations_is_kept_and_reserved(self):
        self.client.sync_tree(make_tree())
        consumer = self.consume(MLX, 'CUSTOM_MLX5')
        report = self.client.sync_tree(make_tree(mlx=None))
        self.assertEqual([], report.deleted)
        self.assertIn(consumer, report.kept[MLX_NAME])
        self.assertIsNotNone(self.client.provider(MLX))
        self.assertIn('Provider %s (%s) left the host but is kept: '
                      'consumers %s hold allocations on it'
                      % (MLX_NAME, MLX, consumer), self.logger.output)
        mlx = self.inventory(MLX, 'CUSTOM_MLX5')
        self.assertEqual(mlx['total'], mlx['reserved'])
        self.assertEqual({'CUSTOM_MLX5': 1}, self.client.usages(MLX))
        # Kept again on the next sync, without another write.
        before = self.generations()
        again = self.client.sync_tree(make_tree(mlx=None))
        self.assertFalse(again.changed)
        self.assertEqual(before, self.generations())
        # Once the consumer is gone, the provider goes too.
        self.assertTrue(self.client.delete_allocations(consumer))
        last = self.client.sync_tree(make_tree(mlx=None))
        self.assertEqual([MLX_NAME], last.deleted)
        self.assertIsNone(self.client.provider(MLX))

    def test_foreign_children_of_the_root_are_left_alone(self):
        self.client.sync_tree(make_tree())
        foreign = str(uuid_lib.uuid4())
        self.placement.write('POST', '/resource_providers', {
            'name': 'host1:NIC Switch agent', 'uuid': foreign,
            'parent_provider_uuid': ROOT})
        report = self.client.sync_tree(make_tree())
        self.assertFalse(report.changed)
        self.assertIsNotNone(self.client.provider(foreign))

    def test_child_of_an_old_root_is_moved(self):
        self.client.sync_tree(make_tree())
        new_root = str(uuid_lib.uuid4())
        tree = make_tree()
        moved = placement.ProviderTree(
            root=placement.Provider(name='host1-new', uuid=new_root),
            children=tuple(placement.Provider(
                name=c.name, uuid=c.uuid, parent_uuid=new_root,
                inventories=c.inventories, traits=c.traits)
                for c in tree.children))
        report = self.client.sync_tree(moved)
        self.assertEqual(['host1-new'], report.created)
        self.assertEqual(new_root,
                         self.client.provider(GPU)['parent_provider_uuid'])

    def test_generation_conflict_is_retried(self):
        self.client.sync_tree(make_tree())
        other = self.placement.new_client()
        session = GenerationBumpingSession(self.placement, other, bumps=1)
        client = self.placement.new_client(session=session)
        before = self.generations()
        report = client.sync_tree(make_tree(gpu=(4, 1)))
        self.assertEqual(1, session.bumped)
        self.assertEqual(1, report.retries)
        self.assertEqual(1, self.inventory(GPU, 'VGPU')['reserved'])
        # The bump (traits) and the retried inventory write both landed;
        # the trait sync then restored the host's own trait set.
        self.assertEqual({GPU_TRAIT}, self.client.traits(GPU)[1])
        self.assertEqual(before[GPU_NAME] + 3, self.generations()[GPU_NAME])

    def test_generation_conflicts_give_up_after_max_retries(self):
        self.client.sync_tree(make_tree())
        session = GenerationBumpingSession(
            self.placement, self.placement.new_client(), bumps=100)
        client = self.placement.new_client(session=session, max_retries=2)
        exc = self.assertRaises(exception.PlacementConflict,
                                client.sync_tree, make_tree(gpu=(4, 1)))
        self.assertEqual(3, session.bumped)
        self.assertEqual(409, exc.status)
        self.assertEqual(placement_client.CONCURRENT_UPDATE, exc.code)
        self.assertIn('/resource_providers/%s/inventories' % GPU, str(exc))
        self.assertIn('generation', exc.detail)

    def test_tree_from_tracker_devices(self):
        tree = placement.build_provider_tree(NODE, ROOT, tracker_devices())
        self.client.sync_tree(tree)
        self.assertEqual({GPU, MLX}, {p['uuid'] for p in
                                      self.client.providers(ROOT)} - {ROOT})
        self.assertFalse(self.client.sync_tree(tree).changed)


class SameNameTest(PlacementTestCase):
    """A resource class and a trait of the same name (issue 16).

    ``[mdev_nvidia-35] mdev_class = MDEV_TYPE_NVIDIA_35`` is legal: its
    resource class is CUSTOM_MDEV_TYPE_NVIDIA_35, which is also the trait
    naming type nvidia-35. Both must exist in Placement.
    """

    def test_sync_creates_both_and_placement_schedules_on_them(self):
        rc = conf.resource_class_for('MDEV_TYPE_NVIDIA_35')
        trait = placement.resource_class_trait_name('nvidia-35')
        self.assertEqual('CUSTOM_MDEV_TYPE_NVIDIA_35', rc)
        self.assertEqual(rc, trait)
        tree = placement.build_provider_tree(NODE, ROOT, tracker_devices(
            [('0000:84:00.0', 'nvidia-35', rc, 2)]))
        report = self.client.sync_tree(tree)
        self.assertEqual(sorted([NODE, GPU_NAME]), sorted(report.created))
        self.assertEqual({trait}, self.client.traits(GPU)[1])
        self.assertEqual(2, self.inventory(GPU, rc)['total'])
        answer = self.client.allocation_candidates({rc: 2},
                                                   required=[trait])
        self.assertEqual([[GPU]], [sorted(r['allocations']) for r in
                                   answer['allocation_requests']])
        # A fresh client (empty caches) agrees that nothing is missing.
        self.assertFalse(
            self.placement.new_client().sync_tree(tree).changed)


class SchedulingTest(PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.client.sync_tree(placement.build_provider_tree(
            NODE, ROOT, tracker_devices(), root_inventories={'VCPU': 8}))

    @staticmethod
    def providers_of(candidates):
        return [sorted(req['allocations'])
                for req in candidates['allocation_requests']]

    def test_mlx5_candidate_is_the_mlx5_parent(self):
        answer = self.client.allocation_candidates({'CUSTOM_MLX5': 1})
        self.assertEqual([[MLX]], self.providers_of(answer))
        self.assertEqual({'CUSTOM_MLX5': 1}, answer['allocation_requests'][0]
                         ['allocations'][MLX]['resources'])
        self.assertEqual({'capacity': 3, 'used': 0},
                         answer['provider_summaries'][MLX]['resources']
                         ['CUSTOM_MLX5'])

    def test_required_trait_filters(self):
        found = self.client.allocation_candidates(
            {'VGPU': 1}, required=[GPU_TRAIT])
        self.assertEqual([[GPU]], self.providers_of(found))
        none = self.client.allocation_candidates(
            {'VGPU': 1}, required=[MLX_TRAIT])
        self.assertEqual([], none['allocation_requests'])
        forbidden = self.client.allocation_candidates(
            {'VGPU': 1}, required=['!' + GPU_TRAIT])
        self.assertEqual([], forbidden['allocation_requests'])

    def test_numbered_groups(self):
        answer = self.client.allocation_candidates(
            groups={'1': {'resources': {'CUSTOM_MLX5': 1},
                          'required': [MLX_TRAIT]},
                    '2': {'resources': {'VGPU': 1}}},
            group_policy='isolate', in_tree=ROOT)
        (request,) = answer['allocation_requests']
        self.assertEqual({'1': [MLX], '2': [GPU]}, request['mappings'])

    def test_flavor_shaped_groups_with_unnumbered_resources(self):
        answer = self.client.allocation_candidates(
            groups={'': {'VCPU': 2}, '1': {'CUSTOM_MLX5': 2}})
        (request,) = answer['allocation_requests']
        self.assertEqual({ROOT: {'resources': {'VCPU': 2}},
                          MLX: {'resources': {'CUSTOM_MLX5': 2}}},
                         request['allocations'])
        self.assertEqual({'': [ROOT], '1': [MLX]}, request['mappings'])

    def test_claim_until_full(self):
        consumers = []
        for _ in range(3):
            answer = self.client.allocation_candidates(
                groups={'1': {'CUSTOM_MLX5': 1}}, limit=1)
            (request,) = answer['allocation_requests']
            consumer = str(uuid_lib.uuid4())
            self.client.claim(consumer, request, PROJECT, USER)
            consumers.append(consumer)
        self.assertEqual({'CUSTOM_MLX5': 3}, self.client.usages(MLX))
        self.assertEqual([], self.client.allocation_candidates(
            {'CUSTOM_MLX5': 1})['allocation_requests'])
        exc = self.assertRaises(
            exception.PlacementConflict, self.client.claim,
            str(uuid_lib.uuid4()),
            {'allocations': {MLX: {'resources': {'CUSTOM_MLX5': 1}}}},
            PROJECT, USER)
        self.assertIn('CUSTOM_MLX5', exc.detail)
        held = self.client.get_allocations(consumers[0])
        self.assertEqual({'CUSTOM_MLX5': 1},
                         held['allocations'][MLX]['resources'])
        self.assertEqual(PROJECT, held['project_id'])
        self.assertTrue(self.client.delete_allocations(consumers[0]))
        self.assertFalse(self.client.delete_allocations(consumers[0]))
        self.assertEqual({'allocations': {}},
                         self.client.get_allocations(consumers[0]))
        self.assertEqual({'CUSTOM_MLX5': 2}, self.client.usages(MLX))

    def test_claim_of_an_existing_consumer_needs_its_generation(self):
        consumer = self.consume(GPU, 'VGPU')
        request = {'allocations': {GPU: {'resources': {'VGPU': 2}}}}
        self.assertRaises(exception.PlacementConflict, self.client.claim,
                          consumer, request, PROJECT, USER)
        generation = self.client.get_allocations(
            consumer)['consumer_generation']
        self.client.claim(consumer, request, PROJECT, USER,
                          consumer_generation=generation)
        self.assertEqual({'VGPU': 2}, self.client.usages(GPU))

    def test_reserved_slots_are_not_offered(self):
        self.client.sync_tree(make_tree(gpu=(4, 4)))
        self.assertEqual([], self.client.allocation_candidates(
            {'VGPU': 1})['allocation_requests'])
        self.client.sync_tree(make_tree(gpu=(4, 3)))
        self.assertEqual([[GPU]], self.providers_of(
            self.client.allocation_candidates({'VGPU': 1})))


class ErrorsTest(PlacementTestCase):

    def test_error_names_url_status_and_message(self):
        exc = self.assertRaises(exception.PlacementError,
                                self.client.allocation_candidates,
                                {'CUSTOM_UNKNOWN': 1})
        self.assertEqual(400, exc.status)
        self.assertIn('/allocation_candidates', str(exc))
        self.assertIn('400', str(exc))
        self.assertIn('CUSTOM_UNKNOWN', str(exc))
        self.assertNotIn('could not comply', str(exc))

    def test_required_traits_without_resources(self):
        exc = self.assertRaises(exception.Invalid,
                                self.client.allocation_candidates,
                                required=[GPU_TRAIT],
                                groups={'1': {'VGPU': 1}})
        self.assertIn(GPU_TRAIT, str(exc))

    def test_unknown_trait(self):
        exc = self.assertRaises(exception.PlacementError,
                                self.client.allocation_candidates,
                                {'VGPU': 1}, required=['CUSTOM_NOPE'])
        self.assertEqual(400, exc.status)
        self.assertIn('CUSTOM_NOPE', exc.detail)

    def test_unreachable_endpoint(self):
        client = placement_client.PlacementClient(
            'http://placement.invalid/placement', session=RefusingSession())
        exc = self.assertRaises(exception.PlacementError, client.usages,
                                ROOT)
        self.assertIsNone(exc.status)
        self.assertEqual('unreachable', exc.kwargs['code'])
        self.assertIn('http://placement.invalid/placement/resource_providers'
                      '/%s/usages' % ROOT, str(exc))
        self.assertIn('connection refused', str(exc))

    def test_root_name_taken_by_another_uuid(self):
        self.client.sync_tree(make_tree())
        tree = make_tree()
        clash = placement.ProviderTree(
            root=placement.Provider(name=NODE, uuid=str(uuid_lib.uuid4())),
            children=())
        exc = self.assertRaises(exception.PlacementConflict,
                                self.client.sync_tree, clash)
        self.assertIn(NODE, exc.detail)
        # The first host keeps its name; the clashing root was not made.
        self.assertEqual([ROOT], [p['uuid'] for p in self.client.providers()
                                  if p['name'] == NODE])
        self.assertIsNone(self.client.provider(clash.root.uuid))
        self.assertEqual(len(tree.children) + 1,
                         len(self.client.providers(in_tree=ROOT)))
