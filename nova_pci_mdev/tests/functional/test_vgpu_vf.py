"""NVIDIA vGPU VFs in the cloud: the stories the SR-IOV scenarios do not tell.

The ``(vgpu-vf)`` runs of the SR-IOV scenario classes cover boot, delete,
NUMA policies, moves, reboot and restart. This module adds what is
particular to a GPU whose vGPUs are its VFs, on these hosts::

    t4host    cell 0: T4 0000:81:00.0, nvidia-35 x2 (mdevs)
    l40shost  cell 1: L40S 0000:41:00.0, 16 VFs, nvidia-1150 (L40S-4Q:
              12 fit in 48 GB; no max_instances in this cloud's nova.conf)

* one alias (``vgpu``: nvidia-35 ORed with nvidia-1150) serves both GPUs;
* capacity is what the driver lists: the 13th 4Q vGPU finds no host, the
  4 VFs left list nothing once 48 GB are in use, and a delete gives them
  back;
* a VF whose type an operator set by hand is never handed out;
* the PF is in no pool: an alias asking for it finds no host;
* the real Placement: ``resources:VGPU=1`` lands on the L40S provider
  and sets the type of one of its VFs.
"""

from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.fixtures import nvidia_sysfs
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds

L40S = '0000:41:00.0'
VGPU = {'pci_passthrough:alias': 'vgpu:1'}


def l40s_host(cloud, name='l40shost', node=1):
    host = fake.FakeHost(name, cells=2)
    host.add_sriov_pf(L40S, 16, numa_node=node, vendor='10de',
                      product='26b9', vf_product='26b9',
                      class_code='0x030200', driver='nvidia',
                      vf_addresses=nvidia_sysfs.vf_addresses(L40S, 16))
    return cloud.add_host(host)


def t4_host(cloud):
    host = fake.FakeHost('t4host', cells=2)
    host.add_mdev_parent('0000:81:00.0', numa_node=0,
                         types={worlds.MDEV_TYPE: 2})
    return cloud.add_host(host)


class OneAliasTwoGpusTest(base.CloudTestCase):

    def test_the_same_alias_gets_an_mdev_or_a_vf(self):
        t4, l40s = t4_host(self.cloud), l40s_host(self.cloud)
        mdev_inst = self.cloud.boot(VGPU, host='t4host')
        vf_inst = self.cloud.boot(VGPU, host='l40shost')
        self.verify()
        (slot,) = [d for d in t4.devices().values()
                   if d.instance_uuid == mdev_inst.uuid]
        (vf,) = [d for d in l40s.devices().values()
                 if d.instance_uuid == vf_inst.uuid]
        self.assertEqual(('mdev-vf', 'nvidia-35'), (slot.dev_type,
                                                    slot.mdev_type))
        self.assertEqual(('type-VF', 'nvidia-1150', L40S, 1), (
            vf.dev_type, vf.mdev_type, vf.parent_addr, vf.numa_node))
        self.assertEqual({vf.address: 1150}, l40s.vgpu_types())
        (hostdev,) = vf_inst.guest.hostdevs
        self.assertEqual((vf.address, False), (hostdev.address,
                                               hostdev.managed))
        self.cloud.delete(vf_inst)
        self.verify()
        self.assertEqual({}, l40s.vgpu_types())


class CapacityTest(base.CloudTestCase):

    def test_capacity_is_what_the_driver_lists_now(self):
        sim = l40s_host(self.cloud)
        insts = [self.cloud.boot(VGPU) for _ in range(12)]
        self.verify()
        self.assertEqual(12, len(sim.vgpu_types()))
        # 12 x 4 GB = 48 GB: the 4 VFs left list nothing, so no slot.
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                VGPU)
        self.assertIn('alias vgpu', exc.reasons['l40shost'])
        free = [a for a, d in sim.devices().items()
                if d.dev_type == 'type-VF' and d.instance_uuid is None]
        self.assertEqual([], free)
        self.cloud.delete(insts[0])
        self.verify()
        again = self.cloud.boot(VGPU)
        self.verify()
        self.assertEqual(12, len(sim.vgpu_types()))
        self.assertEqual(1, len(again.devices))

    def test_a_vf_set_by_hand_is_never_handed_out(self):
        sim = l40s_host(self.cloud)
        vf = nvidia_sysfs.vf_addresses(L40S, 1)[0]
        sim.nv.set_type(vf, 1160)          # an operator: L40S-4A, by hand
        self.cloud.report(sim)
        insts = [self.cloud.boot(VGPU) for _ in range(3)]
        self.assertNotIn(vf, {a for i in insts for a in i.devices})
        for inst in insts:
            self.cloud.delete(inst)
        self.assertEqual({vf: 1160}, sim.vgpu_types())


class WholePfTest(base.CloudTestCase):

    nova_conf = worlds.NOVA_CONF + (
        '\n[pci]\nalias = {"name": "l40s-pf", "vendor_id": "10de", '
        '"product_id": "26b9", "device_type": "type-PF"}\n')

    def test_the_scheduler_never_offers_the_pf(self):
        # The PF's VFs are its vGPUs: no pool holds it, so no host passes
        # the filter (a claim would have to refuse it after the fact).
        sim = l40s_host(self.cloud)
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                {'pci_passthrough:alias': 'l40s-pf:1'})
        self.assertFalse(exc.reasons['l40shost'].startswith('claim failed'),
                         exc.reasons)
        self.assertEqual({}, sim.vgpu_types())
        self.verify()


class PlacementTest(base.CloudTestCase):

    placement = True

    def test_resources_vgpu_sets_the_type_of_a_vf(self):
        sim = l40s_host(self.cloud)
        (child,) = self.cloud.reported['l40shost'].children
        self.assertEqual(16, child.inventories['VGPU'].total)
        self.assertIn('CUSTOM_MDEV_TYPE_NVIDIA_1150', child.traits)
        inst = self.cloud.boot({'resources:VGPU': '1'})
        self.verify()
        (address,) = inst.devices
        self.assertEqual({address: 1150}, sim.vgpu_types())
        self.assertEqual({child.uuid: {'VGPU': 1}}, inst.allocations)
        self.cloud.delete(inst)
        self.verify()
        self.assertEqual({}, sim.vgpu_types())
