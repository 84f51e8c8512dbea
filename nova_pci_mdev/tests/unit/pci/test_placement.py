"""The provider tree computed from tracker devices (pure, no Placement)."""

import uuid as uuid_lib

import testscenarios
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device
from nova_pci_mdev.pci import placement

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus

ROOT = '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9'
NODE = 'host1'
ALIAS_VM = 'aaaaaaaa-0000-4000-8000-000000000001'
PLACEMENT_VM = 'bbbbbbbb-0000-4000-8000-000000000002'
WHOLE_VM = 'cccccccc-0000-4000-8000-000000000003'


def _slot_uuid(parent_addr, index):
    return str(uuid_lib.uuid5(uuid_lib.NAMESPACE_OID,
                              '%s/%d' % (parent_addr, index)))


class Host(object):
    """Builds linked PciDevice objects like the tracker holds them."""

    def __init__(self):
        self.devices = []
        self.parents = {}

    def parent(self, address, mdev_type, resource_class=None, slots=0,
               dev_id=None, virtual=False):
        extra = {}
        if resource_class:
            extra['resource_class'] = resource_class
        if virtual:
            extra['virtual'] = 'true'
        dev = pci_device.PciDevice.create({
            'address': address,
            'vendor_id': '' if virtual else '10de',
            'product_id': '' if virtual else '1eb8',
            'dev_type': DevType.MDEV_PF, 'numa_node': 0,
            'parent_addr': None, 'mdev_type': mdev_type,
            'label': 'label_10de_1eb8',
            'dev_id': dev_id or (address if virtual else 'pci_' + address
                                 .replace(':', '_').replace('.', '_')),
            'extra_info': extra})
        self.devices.append(dev)
        self.parents[address] = dev
        for index in range(slots):
            self.slot(address, mdev_type, index)
        return dev

    def slot(self, parent_addr, mdev_type, index):
        parent = self.parents[parent_addr]
        dev = pci_device.PciDevice.create({
            'address': _slot_uuid(parent_addr, index),
            'vendor_id': parent.vendor_id,
            'product_id': parent.product_id,
            'dev_type': DevType.MDEV_VF, 'numa_node': 0,
            'parent_addr': parent_addr, 'mdev_type': mdev_type,
            'label': parent.label, 'dev_id': None, 'extra_info': {}})
        dev.parent_device = parent
        parent.child_devices.append(dev)
        self.devices.append(dev)
        return dev

    def pci(self, address, dev_type=DevType.SRIOV_PF):
        dev = pci_device.PciDevice.create({
            'address': address, 'vendor_id': '8086', 'product_id': '1528',
            'dev_type': dev_type, 'numa_node': 1, 'parent_addr': None,
            'label': 'label_8086_1528', 'dev_id': 'pci_x',
            'extra_info': {}})
        self.devices.append(dev)
        return dev

    def children(self, parent_addr):
        return self.parents[parent_addr].child_devices


GPU = '0000:84:00.0'
GPU_NAME = 'host1_pci_0000_84_00_0'
MLX = '0000:85:00.2'
MLX_NAME = 'host1_pci_0000_85_00_2'


def _gpu(host, slots=4):
    host.parent(GPU, 'nvidia-222', 'VGPU', slots=slots)


def _mlx(host, slots=3):
    host.parent(MLX, 'mlx5_core-local', 'CUSTOM_MLX5', slots=slots)


def _claim_slots(owner, start, stop, allocate=False):
    def act(host):
        for slot in host.children(GPU)[start:stop]:
            slot.claim(owner)
            if allocate:
                slot.allocate(owner)
    return act


def _claim_parent(allocate):
    def act(host):
        host.parents[GPU].claim(WHOLE_VM)
        if allocate:
            host.parents[GPU].allocate(WHOLE_VM)
    return act


def _claim_unlinked_parent(host):
    # Status of the parent alone decides, even if the children were not
    # linked to it (and so kept their own status).
    host.parents[GPU].child_devices = []
    host.parents[GPU].claim(WHOLE_VM)


def _remove_slots(count):
    def act(host):
        for slot in host.children(GPU)[:count]:
            slot.remove()
    return act


def _remove_parent(host):
    host.parents[GPU].remove()


# name, builders, actions, expected {provider name: (rc, total, reserved,
# trait)}; rc None means "provider without inventory".
TREE_CASES = [
    ('gpu exposing VGPU', [_gpu], [],
     {GPU_NAME: ('VGPU', 4, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('mlx5 exposing CUSTOM_MLX5', [_mlx], [],
     {MLX_NAME: ('CUSTOM_MLX5', 3, 0,
                 'CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL')}),
    ('both parents', [_gpu, _mlx], [],
     {GPU_NAME: ('VGPU', 4, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222'),
      MLX_NAME: ('CUSTOM_MLX5', 3, 0,
                 'CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL')}),
    ('parent without an exposed type',
     [lambda h: h.parent(GPU, None, None)], [], {}),
    ('missing resource class defaults to VGPU',
     [lambda h: h.parent(GPU, 'nvidia-35', None, slots=2)], [],
     {GPU_NAME: ('VGPU', 2, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_35')}),
    ('virtual parent mtty',
     [lambda h: h.parent('mtty', 'mtty-2', 'CUSTOM_MTTY', slots=2,
                         virtual=True)], [],
     {'host1_mtty': ('CUSTOM_MTTY', 2, 0, 'CUSTOM_MDEV_TYPE_MTTY_2')}),
    ('parent with no slot has no inventory', [lambda h: _gpu(h, 0)], [],
     {GPU_NAME: (None, 0, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('slots claimed through the alias path are reserved', [_gpu],
     [_claim_slots(ALIAS_VM, 0, 1), _claim_slots(ALIAS_VM, 1, 3, True)],
     {GPU_NAME: ('VGPU', 4, 3, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('alias and Placement holders side by side', [_gpu],
     [_claim_slots(ALIAS_VM, 0, 1), _claim_slots(PLACEMENT_VM, 1, 3, True)],
     {GPU_NAME: ('VGPU', 4, 1, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('slots held through Placement are not reserved', [_gpu],
     [_claim_slots(PLACEMENT_VM, 0, 3, True)],
     {GPU_NAME: ('VGPU', 4, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('parent claimed whole: all reserved', [_gpu], [_claim_parent(False)],
     {GPU_NAME: ('VGPU', 4, 4, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('parent allocated whole: all reserved', [_gpu], [_claim_parent(True)],
     {GPU_NAME: ('VGPU', 4, 4, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('parent used whole, children not linked', [_gpu],
     [_claim_unlinked_parent],
     {GPU_NAME: ('VGPU', 4, 4, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('removed slots are not counted', [_gpu],
     [_remove_slots(3)],
     {GPU_NAME: ('VGPU', 1, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('removed parent has no provider', [_gpu], [_remove_parent], {}),
    ('slots of another type are not counted',
     [_gpu, lambda h: h.slot(GPU, 'nvidia-35', 9)], [],
     {GPU_NAME: ('VGPU', 4, 0, 'CUSTOM_MDEV_TYPE_NVIDIA_222')}),
    ('PCI and SR-IOV devices give no provider',
     [lambda h: h.pci('0000:81:00.0'),
      lambda h: h.pci('0000:81:00.1', DevType.SRIOV_VF),
      lambda h: h.pci('0000:82:00.0', DevType.STANDARD)], [], {}),
]


def _tree(builders, actions, **kwargs):
    host = Host()
    for build in builders:
        build(host)
    for act in actions:
        act(host)
    # Reversed: children before their parent, as a dict may give them.
    return placement.build_provider_tree(
        NODE, ROOT, list(reversed(host.devices)),
        placement_held={PLACEMENT_VM}, **kwargs)


class ProviderTreeCasesTest(testscenarios.WithScenarios, testtools.TestCase):

    scenarios = [(name, {'builders': builders, 'actions': actions,
                         'expected': expected})
                 for name, builders, actions, expected in TREE_CASES]

    def test_children(self):
        tree = _tree(self.builders, self.actions)
        got = {}
        for child in tree.children:
            self.assertEqual(ROOT, child.parent_uuid)
            self.assertEqual(placement.provider_uuid(child.name), child.uuid)
            (trait,) = child.traits
            if child.inventories:
                ((rc, inv),) = child.inventories.items()
                got[child.name] = (rc, inv.total, inv.reserved, trait)
                self.assertEqual(inv.total, inv.max_unit)
            else:
                got[child.name] = (None, 0, 0, trait)
        self.assertEqual(self.expected, got)
        self.assertEqual(sorted(got), [c.name for c in tree.children])


class BuildProviderTreeTest(testtools.TestCase):

    def _tree(self, builders, actions, **kwargs):
        return _tree(builders, actions, **kwargs)

    def test_root(self):
        tree = self._tree([_gpu], [])
        self.assertEqual(NODE, tree.root.name)
        self.assertEqual(ROOT, tree.root.uuid)
        self.assertIsNone(tree.root.parent_uuid)
        self.assertEqual({}, tree.root.inventories)
        self.assertEqual(frozenset(), tree.root.traits)
        self.assertEqual(tree.root, tree.providers[0])
        self.assertEqual(GPU, tree.children[0].device_address)
        self.assertIsNone(tree.root.device_address)

    def test_root_inventories_optional(self):
        tree = self._tree([_gpu], [], root_inventories={
            'VCPU': 16,
            'MEMORY_MB': placement.Inventory(total=65536, reserved=512)},
            root_traits=('COMPUTE_STATUS_ENABLED',))
        self.assertEqual(placement.Inventory(total=16, max_unit=16),
                         tree.root.inventories['VCPU'])
        self.assertEqual(512, tree.root.inventories['MEMORY_MB'].reserved)
        self.assertEqual({'COMPUTE_STATUS_ENABLED'}, tree.root.traits)
        self.assertNotIn('VGPU', tree.root.inventories)

    def test_provider_uuids_are_pinned(self):
        # Literal values: a change of the namespace or the name scheme
        # would orphan every provider already in Placement.
        for name, uuid in [
                ('host1_pci_0000_84_00_0',
                 '1b827433-6961-5fb7-b8c2-246d7a6e4b5c'),
                ('compute-a_pci_0000_5e_00_0',
                 '9c91481d-5d4a-5a86-971d-6ace03ab5fb2')]:
            self.assertEqual(uuid, placement.provider_uuid(name), name)
        tree = self._tree([_gpu], [])
        self.assertEqual(['1b827433-6961-5fb7-b8c2-246d7a6e4b5c'],
                         [c.uuid for c in tree.children])

    def test_stable_identity(self):
        first = self._tree([_gpu, _mlx], [])
        again = self._tree([_gpu, _mlx], [])
        self.assertEqual(first, again)
        self.assertNotEqual(placement.provider_uuid('host1_pci_0000_84_00_0'),
                            placement.provider_uuid('host2_pci_0000_84_00_0'))
        self.assertEqual(str(uuid_lib.UUID(first.children[0].uuid)),
                         first.children[0].uuid)

    def test_by_uuid_and_to_dict(self):
        tree = self._tree([_gpu], [_claim_slots(ALIAS_VM, 0, 1)])
        by_uuid = tree.by_uuid()
        self.assertEqual({ROOT, placement.provider_uuid(GPU_NAME)},
                         set(by_uuid))
        data = tree.to_dict()
        child = data['children'][0]
        self.assertEqual(GPU_NAME, child['name'])
        self.assertEqual({'total': 4, 'reserved': 1, 'min_unit': 1,
                          'max_unit': 4, 'step_size': 1,
                          'allocation_ratio': 1.0},
                         child['inventories']['VGPU'])
        self.assertEqual(['CUSTOM_MDEV_TYPE_NVIDIA_222'], child['traits'])

    def test_bad_resource_class_names_the_device(self):
        host = Host()
        host.parent(GPU, 'nvidia-35', 'custom_lower', slots=1)
        exc = self.assertRaises(exception.InvalidValue,
                                placement.build_provider_tree, NODE, ROOT,
                                host.devices)
        self.assertIn(GPU, str(exc))
        self.assertIn('custom_lower', str(exc))

    def test_bad_root_uuid_and_nodename(self):
        exc = self.assertRaises(exception.InvalidValue,
                                placement.build_provider_tree,
                                NODE, 'not-a-uuid', [])
        self.assertIn('not-a-uuid', str(exc))
        self.assertRaises(exception.InvalidValue,
                          placement.build_provider_tree, '', ROOT, [])

    def test_provider_name_too_long(self):
        exc = self.assertRaises(exception.InvalidValue,
                                placement.provider_name, 'n' * 190,
                                'pci_0000_84_00_0')
        self.assertIn('200', str(exc))


class NamesTest(testtools.TestCase):

    def test_trait_names(self):
        for mdev_type, trait in [
                ('nvidia-35', 'CUSTOM_MDEV_TYPE_NVIDIA_35'),
                ('nvidia-222', 'CUSTOM_MDEV_TYPE_NVIDIA_222'),
                ('i915-GVTg_V5_4', 'CUSTOM_MDEV_TYPE_I915_GVTG_V5_4'),
                ('mlx5_core-local', 'CUSTOM_MDEV_TYPE_MLX5_CORE_LOCAL'),
                ('mtty-2', 'CUSTOM_MDEV_TYPE_MTTY_2'),
                ('vendor.type:x', 'CUSTOM_MDEV_TYPE_VENDOR_TYPE_X')]:
            self.assertEqual(trait,
                             placement.resource_class_trait_name(mdev_type))

    def test_bad_trait_sources(self):
        for bad in ('', None, 'x' * 256):
            self.assertRaises(exception.InvalidValue,
                              placement.resource_class_trait_name, bad)

    def test_resource_classes(self):
        for good in ('VGPU', 'CUSTOM_MLX5', 'CUSTOM_A_1'):
            self.assertEqual(good, placement.validate_resource_class(good))
        for bad in ('vgpu', 'CUSTOM_', 'CUSTOM_mlx5', 'CUSTOM-X', '', None,
                    'CUSTOM_' + 'X' * 250):
            self.assertRaises(exception.InvalidValue,
                              placement.validate_resource_class, bad)


class InventoryTest(testtools.TestCase):

    def test_defaults(self):
        inv = placement.Inventory(total=3)
        self.assertEqual((3, 0, 1, 3, 1, 1.0),
                         (inv.total, inv.reserved, inv.min_unit,
                          inv.max_unit, inv.step_size, inv.allocation_ratio))

    def test_reserved_equal_total_is_valid(self):
        self.assertEqual(2, placement.Inventory(total=2, reserved=2).reserved)

    def test_bad_values(self):
        for kwargs, word in [
                ({'total': 2, 'reserved': 3}, 'reserved'),
                ({'total': -1}, 'total'),
                ({'total': 2, 'min_unit': 0}, 'min_unit'),
                ({'total': 2, 'min_unit': 3, 'max_unit': 2}, 'min_unit'),
                ({'total': 2, 'step_size': 0}, 'step_size'),
                ({'total': 2, 'allocation_ratio': 0}, 'allocation_ratio'),
                ({'total': True}, 'total'),
                ({'total': '2'}, 'total')]:
            exc = self.assertRaises(exception.InvalidValue,
                                    placement.Inventory, **kwargs)
            self.assertIn(word, str(exc), kwargs)
