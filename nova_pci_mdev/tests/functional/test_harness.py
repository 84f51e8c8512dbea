"""The harness itself: the invariant checks catch what they promise, the
two hypervisors discover the same host, guests go through real libvirt.

If these fail, a green scenario proves nothing.
"""

import testtools

from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import checks
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import harness
from nova_pci_mdev.tests.functional import worlds
from nova_pci_mdev.virt.libvirt import config as vconfig

Status = fields.PciDeviceStatus


class ChecksCatchBreakageTest(base.CloudTestCase):
    """Break one invariant behind the cloud's back; verify() must say so."""

    def setUp(self):
        super().setUp()
        self.host1, self.host2 = worlds.two_hosts(self.cloud, worlds.MDEV)
        self.inst = self.cloud.boot(worlds.MDEV.flavor(1))
        self.verify()

    def assertBroken(self, *fragments):
        found = '\n'.join(checks.problems(self.cloud))
        for fragment in fragments:
            self.assertIn(fragment, found)
        self.assertRaises(AssertionError, self.verify)

    def test_release_behind_the_clouds_back(self):
        self.host1.compute.release(self.inst.uuid)
        self.assertBroken('host1: tracker holds {}', 'handed out')

    def test_unexpected_owner(self):
        self.cloud.held['host1'].pop(self.inst.uuid)
        self.assertBroken('tracker holds {%r' % self.inst.uuid,
                          'store keeps a record of %s' % self.inst.uuid)

    def test_mdev_gone_from_the_kernel_only(self):
        self.cloud.delete(self.inst)
        (uuid,) = self.host1.kernel_mdevs()
        # The kernel loses a free slot's mdev; udev does not tell libvirt.
        self.host1.tree.write(self.host1.tree.sys + '/bus/mdev/devices/%s/'
                              'remove' % uuid, '1')
        self.assertBroken('slot %s' % uuid, 'has mdev None in the kernel',
                          'libvirt reports mdevs')

    def test_domain_undefined_behind_the_clouds_back(self):
        self.host1.undefine_domain(self.inst.name)
        self.assertBroken("domains [] defined, expected ['%s']"
                          % self.inst.name)

    def test_inconsistent_stored_status_is_healed_by_the_product(self):
        dev = self.host1.devices()[self.inst.devices[0]]
        with self.host1.compute.session() as s:
            parent = s.tracker.devices[dev.parent_addr]
            parent.status = Status.AVAILABLE
            s.tx.save_devices([parent])
        # The next session derives the status again: the product heals it.
        self.verify()


class PlacementChecksTest(base.CloudTestCase):
    placement = True

    def test_placement_usage_without_a_slot_is_reported(self):
        worlds.gpu_pair(self.cloud)
        self.verify()
        gpu = self.cloud.reported['gpuhost1'].children[0]
        self.cloud.client.claim(
            '9e0f1c2d-0000-4000-8000-000000000001',
            {'allocations': {gpu.uuid: {'resources': {'VGPU': 1}}}},
            cloud_mod.PROJECT, cloud_mod.USER)
        found = '\n'.join(checks.problems(self.cloud))
        self.assertIn('Placement counts 1 VGPU used, the tracker holds 0',
                      found)
        self.assertIn('Placement offers 1 VGPU, the tracker has 2 free',
                      found)


class HypervisorsAgreeTest(testtools.TestCase):
    """The fake libvirt and the real libvirt test driver, given the same
    host description, make the product discover the same devices."""

    def _host(self):
        host = fake.FakeHost('twin', cells=2)
        host.add_mdev_parent('0000:81:00.0', numa_node=0,
                             types={'nvidia-35': 3, 'nvidia-36': 1})
        host.add_mdev('4b20d080-1b54-4048-85b3-a6a62d165c01',
                      '0000:81:00.0', 'nvidia-35')
        host.add_mdev_parent('0000:85:00.0', numa_node=1, vendor='15b3',
                             product='101d', types={'mlx5_core-local': 2})
        host.add_sriov_pf('0000:83:00.0', 2, numa_node=1)
        host.add_virtual_parent('mtty', {'mtty-1': 2})
        host.add_pci('0000:1d:00.0', numa_node=0)
        return host

    def test_same_devices_and_topology(self):
        views = []
        for hypervisor in harness.HYPERVISORS:
            cloud = self.useFixture(cloud_mod.Cloud(worlds.NOVA_CONF))
            sim = cloud.add_host(self._host(), hypervisor)
            snap = sim.compute.snapshot()
            views.append((
                [(d.address, d.dev_type, d.vendor_id, d.product_id,
                  d.numa_node, d.parent_addr, d.mdev_type, d.status,
                  d.extra_info.get('mdev_exists')) for d in snap.devices],
                sorted((d.address, d.dev_type) for d in snap.unlisted),
                sim.compute.topology, sim.kernel_mdevs()))
        self.assertEqual(views[0], views[1])
        devices = views[0][0]
        # GPU + its existing mdev (2 more nvidia-35 slots to create), mlx5
        # (2 slots to create), PF + 2 VFs; mtty (no type enabled) and the
        # NVMe drive are not whitelisted.
        self.assertEqual(1 + 1 + 1 + 1 + 2, len(devices))
        snap = sim.compute.snapshot()
        self.assertEqual({'0000:81:00.0': 2, '0000:85:00.0': 2}, {
            d.address: capacity.creatable(d) for d in snap.devices
            if capacity.creatable(d)})
        self.assertEqual([('0000:1d:00.0', 'type-PCI'), ('mtty', 'mdev-pf')],
                         views[0][1])
        self.assertEqual(
            {'4b20d080-1b54-4048-85b3-a6a62d165c01':
             ('0000:81:00.0', 'nvidia-35')}, views[0][3])


class GuestValidatorTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.validator = harness.GuestValidator()
        self.addCleanup(self.validator.close)

    def test_libvirt_refuses_a_broken_hostdev(self):
        guest = vconfig.LibvirtConfigGuest(
            name='broken', uuid='1b0c6f6e-0000-4000-8000-000000000001',
            devices=[vconfig.LibvirtConfigGuestHostdevMDEV(uuid='nope')])
        self.assertRaises(harness.GuestXMLInvalid, self.validator.validate,
                          guest)
        self.assertEqual(0, self.validator.count)

    def test_libvirt_accepts_and_reads_back_both_hostdev_kinds(self):
        devices = [vconfig.LibvirtConfigGuestHostdevMDEV(
            uuid='4b20d080-1b54-4048-85b3-a6a62d165c01'),
            vconfig.LibvirtConfigGuestHostdevPCI(address='0000:83:02.1')]
        back = self.validator.validate(vconfig.LibvirtConfigGuest(
            name='good', uuid='1b0c6f6e-0000-4000-8000-000000000002',
            devices=devices))
        self.assertEqual(devices, back.hostdevs)
        self.assertEqual(1, self.validator.count)


class HostDownTest(base.CloudTestCase):

    def test_a_down_host_cannot_be_reached_nor_chosen(self):
        host1, host2 = worlds.two_hosts(self.cloud, worlds.VF)
        self.cloud.host_down('host1')
        self.assertRaises(harness.HostDown, getattr, host1, 'compute')
        inst = self.cloud.boot(worlds.VF.flavor(1))
        self.assertEqual('host2', inst.host)
        exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                worlds.VF.flavor(1), host='host1')
        self.assertEqual({'host1': 'host is down'}, exc.reasons)
