"""ComputeHost with NVIDIA vGPU VFs: real tracker, store and sysfs code.

The host (fake libvirt for the node devices; a fake NVIDIA sysfs tree whose
driver is the emulated one; an mdev sysfs tree for the T4)::

    NUMA node 0                              NUMA node 1
    L40S B 0000:21:00.0 (48 GB)              L40S A 0000:41:00.0 (48 GB)
      VFs 0000:21:00.4-7, exposes              VFs 0000:41:00.4-7, exposes
      nvidia-1155 (L40S-24Q: 2 fit)            nvidia-1150 (L40S-4Q)
                                             T4 0000:81:00.0 nvidia-35 x2
                                               (mdev-pf, one free mdev)
"""

import errno
import os

import fixtures
import testtools

from nova_pci_mdev import conf
from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.compute import host as compute_mod
from nova_pci_mdev.objects import fields
from nova_pci_mdev.store import sqlite as store
from nova_pci_mdev.tests.fixtures import compute as compute_fixture
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.tests.fixtures import nvidia_sysfs
from nova_pci_mdev.tests.fixtures import sysfs
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs_mod
from nova_pci_mdev.virt.libvirt.nvidia import vgpu_vfs

Status = fields.PciDeviceStatus
GPU_A, GPU_B, T4 = '0000:41:00.0', '0000:21:00.0', '0000:81:00.0'
FREE_MDEV = '4b20d080-1b54-4048-85b3-a6a62d165c01'
INST1 = '11111111-1111-4111-8111-111111111111'
INST2 = '22222222-2222-4222-8222-222222222222'
INST3 = '33333333-3333-4333-8333-333333333333'

NOVA_CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-1150", \
"numa_policy": "required"}
alias = {"name": "big", "vendor_id": "10de", "mdev_type": "nvidia-1155"}
alias = {"name": "t4", "vendor_id": "10de", "mdev_type": "nvidia-35"}
alias = {"name": "t4-whole", "vendor_id": "10de", "product_id": "1eb8", \
"device_type": "mdev-pf"}
alias = {"name": "l40s-whole", "vendor_id": "10de", "product_id": "26b9", \
"device_type": "type-PF"}

[devices]
enabled_mdev_types = nvidia-1150, nvidia-1155, nvidia-35

[mdev_nvidia-1150]
device_addresses = 0000:41:00.0

[mdev_nvidia-1155]
device_addresses = 0000:21:00.0
"""


class VgpuHost(fixtures.Fixture):
    """The host of the module docstring, restartable."""

    def _setUp(self):
        objects.register_all()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.mdevs = self.useFixture(sysfs.SysfsTree(os.path.join(tmp, 'm')))
        self.nv = self.useFixture(nvidia_sysfs.NvidiaSysfsTree(
            os.path.join(tmp, 'n')))
        self.fake = fakelibvirt.FakeHost(hostname='vgpu-host', cells=2)
        self.kernel = compute_fixture.KernelAndLibvirt(self.fake, self.mdevs)
        for pf, node in ((GPU_B, 0), (GPU_A, 1)):
            vfs = self.nv.add_gpu(pf, num_vfs=4)
            self.fake.add_sriov_pf(pf, 4, numa_node=node, vendor='10de',
                                   product='26b9', vf_product='26b9',
                                   vf_addresses=vfs, class_code='0x030200',
                                   driver='nvidia')
        self.kernel.add_parent(T4, 1, {'nvidia-35': 2})
        self.kernel.add_mdev(FREE_MDEV, T4, 'nvidia-35')
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(NOVA_CONF)
        self.settings = conf.load_settings(conf.new_config([path]))
        self.state = os.path.join(tmp, 'state.db')
        self.restart()

    def restart(self):
        host = host_mod.Host(self.fake.connect(), nodename='vgpu-host')
        self.store = store.SqliteStore(self.state)
        self.addCleanup(self.store.close)
        self.compute = compute_mod.ComputeHost(
            host, self.settings, self.store, mdev.MdevManager(
                mdev_sysfs.SysfsBackend(self.mdevs.root,
                                        writer=self.kernel.write)),
            host.numa_topology(), vgpus=vgpu_vfs.VgpuVfManager(
                nvidia_sysfs_mod.NvidiaVfSysfs(self.nv.root,
                                               writer=self.nv.write)))
        return self.compute


def vfs_of(pf):
    return nvidia_sysfs.vf_addresses(pf, 4)


class VgpuVfComputeTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(VgpuHost())
        self.compute = self.host.compute

    def flavor(self, aliases, **specs):
        specs['pci_passthrough:alias'] = aliases
        return flavor_mod.parse(specs, self.host.settings.aliases)

    def claim(self, instance, aliases, **specs):
        return self.compute.claim(instance, self.flavor(aliases, **specs))

    def devices(self):
        return {d.address: d for d in self.compute.snapshot().devices}

    def state(self):
        """Everything that must not change when an operation fails."""
        snap = self.compute.snapshot()
        return ({d.address: (d.status, d.instance_uuid)
                 for d in snap.devices}, self.host.nv.types(),
                self.host.mdevs.mdevs(), dict(snap.instances))

    # -- discovery -----------------------------------------------------------

    def test_vfs_are_slots_of_their_gpus_type(self):
        devs = self.devices()
        for pf, kind, node in ((GPU_A, 'nvidia-1150', 1),
                               (GPU_B, 'nvidia-1155', 0)):
            self.assertEqual(('type-PF', kind), (devs[pf].dev_type,
                                                 devs[pf].mdev_type))
            for vf in vfs_of(pf):
                self.assertEqual(('type-VF', kind, pf, node, 'available'), (
                    devs[vf].dev_type, devs[vf].mdev_type,
                    devs[vf].parent_addr, devs[vf].numa_node,
                    devs[vf].status))
        pools = {(p.tags.get('dev_type'), p.mdev_type, p.numa_node): p.count
                 for p in self.compute.snapshot().pools}
        self.assertEqual(4, pools[('type-VF', 'nvidia-1150', 1)])
        self.assertEqual(4, pools[('type-VF', 'nvidia-1155', 0)])

    def test_placement_reports_each_gpu_like_an_mdev_parent(self):
        tree = self.compute.provider_tree()
        got = {c.device_address: (dict((rc, inv.total) for rc, inv in
                                       c.inventories.items()),
                                  sorted(c.traits))
               for c in tree.children}
        self.assertEqual(({'VGPU': 4}, ['CUSTOM_MDEV_TYPE_NVIDIA_1150']),
                         got[GPU_A])
        self.assertEqual(({'VGPU': 4}, ['CUSTOM_MDEV_TYPE_NVIDIA_1155']),
                         got[GPU_B])
        self.claim(INST1, 'vGPU:1')
        (child,) = [c for c in self.compute.provider_tree().children
                    if c.device_address == GPU_A]
        self.assertEqual(1, child.inventories['VGPU'].reserved)

    def test_the_placement_path_claims_vfs_of_the_chosen_gpu(self):
        result = self.compute.claim(INST1, flavor_mod.parse(
            {'resources:VGPU': '2', 'hw:numa_nodes': '1'},
            self.host.settings.aliases))
        # The provider on the instance's cell (cell 0: L40S B, 24Q).
        self.assertEqual((0,), result.numa_cells)
        self.assertEqual({GPU_B}, {d.parent_addr for d in result.devices})
        self.assertEqual({d.address: 1155 for d in result.devices},
                         self.host.nv.types())
        (child,) = [c for c in self.compute.provider_tree().children
                    if c.device_address == GPU_B]
        self.assertEqual({child.uuid: {'VGPU': 2}}, result.allocations)
        self.assertEqual(0, child.inventories['VGPU'].reserved)

    # -- claim ---------------------------------------------------------------

    def test_claim_sets_the_type_and_the_guest_gets_the_vf(self):
        result = self.claim(INST1, 'vGPU:1', **{'hw:numa_nodes': '1'})
        (dev,) = result.devices
        self.assertEqual((GPU_A, 'nvidia-1150'), (dev.parent_addr,
                                                  dev.mdev_type))
        self.assertEqual((1,), result.numa_cells)
        self.assertEqual({dev.address: 1150}, self.host.nv.types())
        self.assertEqual((dev.address,), result.vgpu_types_set)
        xml = result.devices_xml()
        self.assertIn('type="pci" managed="no"', xml)
        self.assertIn('function="0x4"', xml)
        # The siblings now offer 4 GB types only (read from sysfs).
        self.assertEqual([1150, 1160], self.host.nv.creatable_ids(
            vfs_of(GPU_A)[1]))
        devs = self.devices()
        self.assertEqual('nvidia-1150', devs[dev.address].extra_info[
            'vgpu_current'])
        self.assertEqual(Status.UNAVAILABLE, devs[GPU_A].status)

    def test_numa_policy_is_honoured(self):
        # 4Q VFs live on node 1, 24Q VFs on node 0: one cell cannot have
        # both (vGPU is "required", big "legacy"), two cells can.
        before = self.state()
        exc = self.assertRaises(exception.RequestNotSatisfiable, self.claim,
                                INST1, 'vGPU:1,big:1',
                                **{'hw:numa_nodes': '1'})
        self.assertIn('vGPU', str(exc))
        self.assertEqual(before, self.state())
        result = self.claim(INST1, 'vGPU:1,big:1', **{'hw:numa_nodes': '2'})
        self.assertEqual({(GPU_A, 1), (GPU_B, 0)}, {
            (d.parent_addr, d.numa_node) for d in result.devices})
        self.assertEqual([1150, 1155], sorted(self.host.nv.types().values()))

    def test_capacity_follows_what_sysfs_says(self):
        self.claim(INST1, 'big:1')
        self.claim(INST2, 'big:1')
        # 2 x 24 GB: GPU B is full, its other VFs list nothing any more.
        pools = {(p.mdev_type, p.numa_node): p.count
                 for p in self.compute.snapshot().pools}
        self.assertEqual(0, pools.get(('nvidia-1155', 0), 0))
        exc = self.assertRaises(exception.RequestNotSatisfiable,
                                self.claim, INST3, 'big:1')
        self.assertIn('big', str(exc))
        self.assertEqual(2, len(self.host.nv.types()))

    def test_more_than_fits_at_once_rolls_back_everything(self):
        before = self.state()
        exc = self.assertRaises(exception.VgpuTypeNotCreatable,
                                self.claim, INST1, 'big:3')
        self.assertIn('nvidia-1155', str(exc))
        self.assertEqual(before, self.state())

    def test_dry_run_writes_nothing(self):
        before = self.state()
        result = self.compute.claim(INST1, self.flavor('vGPU:2'),
                                    dry_run=True)
        self.assertEqual(2, len(result.devices))
        self.assertEqual((), result.vgpu_types_set)
        self.assertEqual(before, self.state())
        self.assertEqual([], self.host.nv.writes)

    def test_a_failure_after_the_types_were_set_clears_them(self):
        # The whole T4 needs its free mdev removed; the kernel refuses.
        self.host.mdevs.fail_next('remove', errno.EBUSY)
        before = self.state()
        self.assertRaises(exception.MdevError, self.claim, INST1,
                          'vGPU:2,t4-whole:1')
        self.assertEqual(before, self.state())
        self.assertEqual(4, len(self.host.nv.writes))   # 2 set, 2 cleared

    def test_the_pf_is_never_passed_through_whole(self):
        # Not even offered: no pool holds the PF, so a scheduler never
        # picks this host for it and the claim is "cannot be satisfied"
        # (exit 1), not bad input.
        before = self.state()
        pools = self.compute.snapshot().pools
        self.assertEqual([], [p for p in pools
                              if p.tags.get('dev_type') == fields.PciDeviceType.SRIOV_PF])
        exc = self.assertRaises(exception.RequestNotSatisfiable, self.claim,
                                INST1, 'l40s-whole:1')
        self.assertIn('alias l40s-whole', str(exc))
        self.assertEqual(before, self.state())

    def test_a_vf_holding_another_type_is_not_offered_nor_touched(self):
        vf = vfs_of(GPU_A)[0]
        self.host.nv.set_type(vf, 1160)         # an operator, by hand: 4A
        devs = self.devices()
        self.assertNotIn(vf, devs)
        self.claim(INST1, 'vGPU:3')
        self.compute.release(INST1)
        self.assertEqual({vf: 1160}, self.host.nv.types())

    def test_a_vf_preset_to_the_type_is_used_and_cleared_on_release(self):
        vf = vfs_of(GPU_A)[0]
        self.host.nv.set_type(vf, 1150)
        result = self.claim(INST1, 'vGPU:1')
        self.assertEqual((vf,), tuple(d.address for d in result.devices))
        self.assertEqual((), result.vgpu_types_set)
        self.compute.release(INST1)
        self.assertEqual({}, self.host.nv.types())

    # -- release, reboot -------------------------------------------------------

    def test_release_clears_the_types(self):
        devs = self.claim(INST1, 'vGPU:2').devices
        freed = self.compute.release(INST1)
        self.assertEqual({}, self.host.nv.types())
        self.assertTrue({d.address for d in devs} <= {
            d.address for d in freed})
        self.assertEqual({Status.AVAILABLE}, {
            d.status for a, d in self.devices().items()
            if a.startswith('0000:41')})
        self.assertIn(1156, self.host.nv.creatable_ids(devs[0].address))

    def test_release_while_the_guest_runs_fails_and_keeps_everything(self):
        devs = self.claim(INST1, 'vGPU:2').devices
        self.host.nv.hold(devs[1].address)
        before = self.state()
        exc = self.assertRaises(exception.VgpuVfError,
                                self.compute.release, INST1)
        self.assertIn(devs[1].address, str(exc))
        self.assertEqual(before, self.state())
        self.host.nv.hold(devs[1].address, False)
        self.compute.release(INST1)
        self.assertEqual({}, self.host.nv.types())

    def test_reboot_gives_allocated_vfs_their_type_back(self):
        devs = self.claim(INST1, 'vGPU:2').devices
        self.host.nv.reboot()
        self.host.restart()
        report, restored = self.host.compute.sync()
        self.assertEqual(sorted(d.address for d in devs),
                         sorted(restored.recreated))
        self.assertEqual({}, restored.failed)
        self.assertEqual({d.address: 1150 for d in devs},
                         self.host.nv.types())
        self.assertEqual({d.address: (Status.ALLOCATED, INST1)
                          for d in devs}, {
            a: (d.status, d.instance_uuid)
            for a, d in self.devices().items() if d.instance_uuid})

    def test_reboot_restore_failure_is_reported_and_state_kept(self):
        (dev,) = self.claim(INST1, 'vGPU:1').devices
        self.host.nv.reboot()
        self.host.nv.set_type(dev.address, 1160)   # taken by hand meanwhile
        self.host.restart()
        _report, restored = self.host.compute.sync()
        self.assertIn('holds vGPU type nvidia-1160',
                      str(restored.failed[dev.address]))
        held = self.devices()[dev.address]
        self.assertEqual((Status.ALLOCATED, INST1),
                         (held.status, held.instance_uuid))
