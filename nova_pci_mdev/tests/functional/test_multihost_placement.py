"""Scheduling through a real OpenStack Placement (in process).

:class:`FleetTest`: the 20 hosts of :func:`worlds.fleet` report their
provider trees (``ComputeHost`` snapshot tree -> ``PlacementClient.
sync_tree``); flavors asking for ``resources:VGPU=1``,
``resources1:CUSTOM_MLX5=1``, aliases, and both at once are scheduled by
:class:`~.cloud.Cloud` (allocation candidates, then the pool and NUMA
filters, then the host's claim with the allocation request's allocations)
until the cloud is full. Nothing may ever be handed out twice, across the
trackers of all hosts and Placement's usages, and the request after the
last one that fits gets a clean "no valid host".

:class:`PlacementPathTest`: the instance lifecycle on the Placement path
(:func:`worlds.gpu_pair`), with Placement checked after every step.

:class:`SriovGpuPlacementTest`: an A100-like host whose VFs are the mdev
parents reports one provider per GPU (issue 27); ``resources:VGPU=N``
takes N VF parents of one GPU, and the GPU whole and its mdevs exclude
each other in Placement.
"""

import collections
import itertools

from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds

Status = fields.PciDeviceStatus
DevType = fields.PciDeviceType

VGPU = {'resources:VGPU': '1'}
MLX5 = {'resources1:CUSTOM_MLX5': '1'}
NIC = {'pci_passthrough:alias': 'vf:1'}
VGPU_ALIAS = {'pci_passthrough:alias': 'vgpu:1',
              'hw:pci_numa_affinity_policy': 'required', 'hw:numa_nodes': '1'}
VGPU_AND_NIC = {'resources:VGPU': '1', 'pci_passthrough:alias': 'vf:1'}
MLX5_AND_VGPU = {'resources1:CUSTOM_MLX5': '1', 'resources2:VGPU': '1',
                 'group_policy': 'none'}
FLAVORS = (('vgpu', VGPU), ('mlx5', MLX5), ('nic', NIC),
           ('vgpu-alias', VGPU_ALIAS), ('vgpu+nic', VGPU_AND_NIC),
           ('mlx5+vgpu', MLX5_AND_VGPU))


def free_devices(hosts):
    """Free (nvidia-35 slots, mlx5 slots, VFs) over the trackers."""
    free = collections.Counter()
    for sim in hosts:
        for dev in sim.devices().values():
            if dev.status == Status.AVAILABLE and dev.dev_type in (
                    DevType.MDEV_VF, DevType.SRIOV_VF):
                free[dev.mdev_type or dev.dev_type] += 1
            if capacity.usable(dev):
                free[dev.mdev_type] += capacity.usable(dev)
    return dict(free)


def placement_free(cloud):
    """Free units per resource class over every child provider."""
    free = collections.Counter()
    for sim in cloud.hosts.values():
        for prov in cloud.reported[sim.name].children:
            _gen, inventories = cloud.client.inventories(prov.uuid)
            usages = cloud.client.usages(prov.uuid)
            for rc, inv in inventories.items():
                free[rc] += inv['total'] - inv['reserved'] - usages.get(rc, 0)
    return dict(free)


class PlacementTestCase(base.CloudTestCase):
    placement = True

    def assertNoDoubleBooking(self):
        """Each device has one owner, the one the cloud gave it to."""
        owners = {}
        for name, sim in self.cloud.hosts.items():
            for address, dev in sim.devices().items():
                if dev.instance_uuid:
                    owners[(name, address)] = dev.instance_uuid
        handed = collections.Counter(
            (inst.host, a) for inst in self.cloud.instances.values()
            for a in inst.devices)
        self.assertEqual([], [k for k, n in handed.items() if n > 1])
        self.assertEqual({k: u for k, u in owners.items()}, {
            (inst.host, a): inst.uuid
            for inst in self.cloud.instances.values() for a in inst.devices})


class FleetTest(PlacementTestCase):

    def test_fill_the_cloud_without_double_booking(self):
        hosts = worlds.fleet(self.cloud)
        self.assertEqual(20, len(hosts))
        providers = {p['name'] for p in self.cloud.client.providers()}
        self.assertEqual(20 + 19, len(providers))
        self.assertIn('gpu-01_pci_0000_81_00_0', providers)
        self.assertEqual({'nvidia-35': 10, worlds.MLX5_TYPE: 9,
                          DevType.SRIOV_VF: 9}, free_devices(hosts))

        booted = collections.Counter()
        refused = {}
        for name, specs in itertools.cycle(FLAVORS):
            if len(refused) == len(FLAVORS):
                break
            if name in refused:
                continue
            try:
                self.cloud.boot(specs)
            except cloud_mod.NoValidHost as exc:
                refused[name] = exc
                continue
            booted[name] += 1

        # Placement's inventories and usages equal the trackers' on every
        # provider (total - reserved - used == free slots), see checks.
        self.verify()
        self.assertNoDoubleBooking()
        # Everything was handed out: no slot and no VF is left.
        self.assertEqual({}, free_devices(hosts))
        self.assertEqual(10, booted['vgpu'] + booted['vgpu-alias'] +
                         booted['vgpu+nic'] + booted['mlx5+vgpu'])
        self.assertEqual(9, booted['mlx5'] + booted['mlx5+vgpu'])
        self.assertEqual(9, booted['nic'] + booted['vgpu+nic'])
        for name, _specs in FLAVORS:
            self.assertGreater(booted[name], 0, name)
        # The request after the last one that fitted: a clean answer that
        # names every host.
        for name, exc in refused.items():
            self.assertIn('No valid host was found', str(exc))
            self.assertEqual(set(self.cloud.hosts), set(exc.reasons), name)
        self.assertIn('Placement has no allocation candidate',
                      refused['vgpu'].reasons['gpu-01'])
        self.assertIn('alias vgpu', refused['vgpu-alias'].reasons['gpu-01'])


class PlacementPathTest(PlacementTestCase):
    """Lifecycle of ``resources:`` instances; :meth:`verify` compares
    Placement's inventories and usages with every tracker at each step."""

    def setUp(self):
        super().setUp()
        self.host1, self.host2 = worlds.gpu_pair(self.cloud)

    def _slots(self, sim, consumer):
        return [d for d in sim.devices().values()
                if d.instance_uuid == consumer]

    def test_boot_claims_the_slot_of_the_allocated_provider(self):
        inst = self.cloud.boot(MLX5_AND_VGPU)
        self.verify()
        got = {d.parent_addr: d.mdev_type
               for d in self._slots(self.host1, inst.uuid)}
        self.assertEqual({worlds.GPU_ADDR: 'nvidia-35',
                          worlds.MLX_ADDR: worlds.MLX5_TYPE}, got)
        placed = self.cloud.client.get_allocations(inst.uuid)['allocations']
        self.assertEqual(
            {self.cloud.reported['gpuhost1'].children[i].uuid: rc
             for i, rc in ((0, {'VGPU': 1}), (1, {'CUSTOM_MLX5': 1}))},
            {rp: a['resources'] for rp, a in placed.items()})

    def test_alias_and_placement_paths_share_the_slots(self):
        a = self.cloud.boot(VGPU)
        b = self.cloud.boot(VGPU_ALIAS)
        self.verify()
        self.assertEqual(['gpuhost1', 'gpuhost1'], [a.host, b.host])
        # Host 1's GPU is full on both paths, reported so to Placement.
        c = self.cloud.boot(VGPU)
        d = self.cloud.boot(VGPU_ALIAS)
        self.assertEqual(['gpuhost2', 'gpuhost2'], [c.host, d.host])
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot, VGPU)
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          VGPU_ALIAS)
        self.verify()
        # A slot freed on one path is offered to the other one.
        self.cloud.delete(b)
        e = self.cloud.boot(VGPU)
        self.assertEqual('gpuhost1', e.host)
        self.cloud.delete(a)
        f = self.cloud.boot(VGPU_ALIAS)
        self.assertEqual('gpuhost1', f.host)
        self.verify()
        self.assertNoDoubleBooking()

    def test_cold_migrate_moves_the_allocation(self):
        inst = self.cloud.boot(VGPU)
        mig = self.cloud.migrate(inst)
        self.verify()
        self.assertEqual('gpuhost2', mig.dest)
        self.assertEqual(1, len(self._slots(self.host2, mig.uuid)))
        # Source and destination both hold a unit until the confirm.
        self.assertEqual({'VGPU': 2, 'CUSTOM_MLX5': 4},
                         placement_free(self.cloud))
        self.cloud.confirm_resize(inst)
        self.verify()
        self.assertEqual([], self._slots(self.host1, inst.uuid))
        self.assertEqual(1, len(self._slots(self.host2, inst.uuid)))
        placed = self.cloud.client.get_allocations(inst.uuid)['allocations']
        self.assertEqual({'gpuhost2'}, {self.cloud.providers[rp]
                                        for rp in placed})
        self.assertEqual({}, self.cloud.client.get_allocations(
            mig.uuid)['allocations'])

    def test_resize_revert_gives_the_destination_back(self):
        inst = self.cloud.boot(VGPU)
        mig = self.cloud.resize(inst, MLX5_AND_VGPU)
        self.verify()
        self.assertEqual(2, len(self._slots(self.host2, mig.uuid)))
        self.cloud.revert_resize(inst)
        self.verify()
        self.assertEqual({'VGPU': 3, 'CUSTOM_MLX5': 4},
                         placement_free(self.cloud))
        self.assertEqual({}, self.cloud.client.get_allocations(
            mig.uuid)['allocations'])

    def test_resize_on_the_same_host_then_confirm(self):
        inst = self.cloud.boot(VGPU)
        (old,) = self._slots(self.host1, inst.uuid)
        mig = self.cloud.resize(inst, MLX5_AND_VGPU, host='gpuhost1')
        self.verify()
        self.cloud.confirm_resize(inst)
        self.verify()
        new = self._slots(self.host1, inst.uuid)
        self.assertEqual(2, len(new))
        self.assertNotIn(old.address, {d.address for d in new})
        self.assertEqual({'VGPU': 3, 'CUSTOM_MLX5': 3},
                         placement_free(self.cloud))
        self.assertEqual({}, self.cloud.client.get_allocations(
            mig.uuid)['allocations'])

    def test_evacuate_keeps_both_allocations_until_the_source_is_back(self):
        inst = self.cloud.boot(MLX5_AND_VGPU)
        self.cloud.host_down('gpuhost1')
        contacts = self.host1.contacts()
        self.cloud.evacuate(inst)
        self.assertEqual(contacts, self.host1.contacts())
        self.verify()
        placed = self.cloud.client.get_allocations(inst.uuid)['allocations']
        self.assertEqual(['gpuhost1', 'gpuhost1', 'gpuhost2', 'gpuhost2'],
                         sorted(self.cloud.providers[rp] for rp in placed))
        self.cloud.host_up('gpuhost1')
        self.verify()
        placed = self.cloud.client.get_allocations(inst.uuid)['allocations']
        self.assertEqual(['gpuhost2', 'gpuhost2'],
                         sorted(self.cloud.providers[rp] for rp in placed))
        self.assertEqual([], self._slots(self.host1, inst.uuid))
        self.assertEqual({'VGPU': 3, 'CUSTOM_MLX5': 3},
                         placement_free(self.cloud))

    def test_whole_gpu_and_placement_slots_exclude_each_other(self):
        whole = self.cloud.boot({'pci_passthrough:alias': 'gpu:1'})
        self.verify()
        self.assertEqual('gpuhost1', whole.host)
        # Placement sees host1's GPU fully reserved: VGPUs go to host2.
        a = self.cloud.boot({'resources:VGPU': '2'})
        self.assertEqual('gpuhost2', a.host)
        self.assertEqual(2, len(self._slots(self.host2, a.uuid)))
        self.assertEqual({'VGPU': 0, 'CUSTOM_MLX5': 4},
                         placement_free(self.cloud))
        # A Placement-held slot keeps host2's GPU from whole passthrough.
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                {'pci_passthrough:alias': 'gpu:1'})
        self.assertIn('alias gpu', exc.reasons['gpuhost2'])
        self.verify()
        self.cloud.delete(whole)
        self.assertEqual({'VGPU': 2, 'CUSTOM_MLX5': 4},
                         placement_free(self.cloud))
        self.verify()


class SriovGpuPlacementTest(PlacementTestCase):
    """An A100-like host (:func:`worlds.sriov_gpu_host`: two SR-IOV GPUs
    of 4 VF parents, one mdev each) in the real Placement: one provider
    per GPU, so ``resources:VGPU=N`` (one group, one provider) can take
    N > 1 vGPUs of one GPU, and the GPU passed through whole and its
    mdevs exclude each other in Placement as in the tracker."""

    nova_conf = worlds.SRIOV_GPU_NOVA_CONF

    def setUp(self):
        super().setUp()
        self.host = worlds.sriov_gpu_host(self.cloud)
        self.gpu = {}
        for prov in self.cloud.reported[self.host.name].children:
            self.gpu[prov.device_address] = prov.uuid

    def test_one_provider_per_gpu_in_placement(self):
        names = {p['name']: p['uuid'] for p in self.cloud.client.providers()}
        self.assertEqual({'a100-host', 'a100-host_pci_0000_41_00_0',
                          'a100-host_pci_0000_42_00_0'}, set(names))
        for pf in worlds.SRIOV_GPU_PFS:
            _gen, inventories = self.cloud.client.inventories(self.gpu[pf])
            self.assertEqual((4, 0), (inventories['VGPU']['total'],
                                      inventories['VGPU']['reserved']))
            _gen, traits = self.cloud.client.traits(self.gpu[pf])
            self.assertEqual({'CUSTOM_MDEV_TYPE_NVIDIA_699'}, traits)
        self.verify()

    def test_vgpu_n_whole_gpu_and_mdevs_without_double_booking(self):
        # vGPU:3 in one request group: 3 units of one GPU's provider, 3
        # mdevs on 3 of its VF parents.
        a = self.cloud.boot({'resources:VGPU': '3'})
        self.verify()
        placed = self.cloud.client.get_allocations(a.uuid)['allocations']
        ((rp, alloc),) = placed.items()
        self.assertEqual({'VGPU': 3}, alloc['resources'])
        (pf_a,) = [pf for pf, uuid in self.gpu.items() if uuid == rp]
        slots = [d for d in self.host.devices().values()
                 if d.instance_uuid == a.uuid]
        self.assertEqual(3, len(slots))
        vf_parents = {d.parent_addr for d in slots}
        self.assertEqual(3, len(vf_parents))
        self.assertEqual({pf_a}, {self.host.devices()[v].parent_addr
                                  for v in vf_parents})
        (pf_b,) = set(worlds.SRIOV_GPU_PFS) - {pf_a}
        # The GPU with mdevs in use cannot be passed through whole; the
        # other one can, and Placement then sees all of it reserved.
        whole = self.cloud.boot({'pci_passthrough:alias': 'a100:1'})
        self.assertEqual([pf_b], list(whole.devices))
        self.verify()
        _gen, inventories = self.cloud.client.inventories(self.gpu[pf_b])
        self.assertEqual((4, 4), (inventories['VGPU']['total'],
                                  inventories['VGPU']['reserved']))
        self.assertEqual({'VGPU': 1}, placement_free(self.cloud))
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                {'pci_passthrough:alias': 'a100:1'})
        self.assertIn('alias a100', exc.reasons['a100-host'])
        self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                          {'resources:VGPU': '2'})
        # The last free VF parent of the first GPU.
        b = self.cloud.boot({'resources:VGPU': '1'})
        self.assertEqual({self.gpu[pf_a]}, set(
            self.cloud.client.get_allocations(b.uuid)['allocations']))
        self.assertEqual({'VGPU': 0}, placement_free(self.cloud))
        self.verify()
        self.assertNoDoubleBooking()
        # The whole GPU back: two numbered groups of 2 (group_policy none)
        # share its provider, on its 4 VF parents.
        self.cloud.delete(whole)
        c = self.cloud.boot({'resources1:VGPU': '2', 'resources2:VGPU': '2',
                             'group_policy': 'none'})
        self.assertEqual({self.gpu[pf_b]: {'VGPU': 4}}, {
            rp: a['resources'] for rp, a in self.cloud.client.get_allocations(
                c.uuid)['allocations'].items()})
        self.assertEqual(4, len({d.parent_addr for d in
                                 self.host.devices().values()
                                 if d.instance_uuid == c.uuid}))
        self.verify()
        self.assertNoDoubleBooking()
