"""Host lifecycle with instances holding devices: reboot, configuration
changes, a parent that goes away.

Every story runs on both hypervisors of the functional harness
(:class:`~nova_pci_mdev.tests.functional.harness.SimHost`): the fake
libvirt with a sysfs tree (``fake``) and libvirt's real test driver with
the emulated backend (``libvirt-test``), on this host::

    cell 0                                cell 1
    GPU0 0000:81:00.0  nvidia-35 x4       GPU1 0000:82:00.0  nvidia-35 x4
                       nvidia-36 x2                          nvidia-36 x2
    X710 PF 0000:83:00.0 + 2 VFs

The invariant under test: an allocation is never lost. Whatever changes
under it (the mdevs vanish, the whitelist or the parent's type changes,
the parent disappears), the instance keeps holding the device, the sync
reports it (``kept``; ``MISSING from host`` in the CLI) until it is
released, and its mdev comes back with the same UUID on the same parent
whenever the parent can host it.
"""

import errno
import io
import os

import fixtures
import testscenarios

from nova_pci_mdev import conf
from nova_pci_mdev import exception
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import compute as compute_fixture
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.tests.functional import harness
from nova_pci_mdev.tests.functional import worlds
from nova_pci_mdev.tests.hardening import hosts
from nova_pci_mdev.tests.hardening import recorder

load_tests = testscenarios.load_tests_apply_scenarios
Status = fields.PciDeviceStatus
DevType = fields.PciDeviceType
GPU0, GPU1, NIC = hosts.GPU0, hosts.GPU1, hosts.NIC
A = 'b0b0b0b0-0000-4000-8000-00000000000a'
B = 'b0b0b0b0-0000-4000-8000-00000000000b'
C = 'b0b0b0b0-0000-4000-8000-00000000000c'

#: worlds.NOVA_CONF without the GPU and VF device specs.
NO_GPU_NO_VF = worlds.NOVA_CONF.replace(
    'device_spec = {"vendor_id": "10de"}\n', '').replace(
    'device_spec = {"vendor_id": "8086", "product_id": "154c"}\n', '')
#: worlds.NOVA_CONF with GPU0 switched to nvidia-36.
GPU0_AS_36 = worlds.NOVA_CONF.replace(
    'enabled_mdev_types = nvidia-35, mlx5_core-local',
    'enabled_mdev_types = nvidia-35, nvidia-36, mlx5_core-local') + (
    '\n[mdev_nvidia-36]\ndevice_addresses = %s\n' % GPU0)


def build_fake():
    fake = fakelibvirt.FakeHost('life', cells=2)
    for address, node in ((GPU0, 0), (GPU1, 1)):
        fake.add_mdev_parent(address, numa_node=node,
                             types={'nvidia-35': 4, 'nvidia-36': 2})
    fake.add_sriov_pf(NIC, 2, numa_node=0)
    return fake


class LifecycleTest(recorder.HardeningTestCase):

    scenarios = [(h, {'hypervisor': h}) for h in harness.HYPERVISORS]

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        state = os.path.join(self.tmp, 'state')
        os.mkdir(state)
        self.fake = build_fake()
        self.sim = harness.SimHost('life', self.fake,
                                   self.settings(worlds.NOVA_CONF), state,
                                   self.hypervisor)
        self.sim.start()
        self.addCleanup(self.sim.stop)

    def settings(self, text):
        path = os.path.join(self.tmp, 'nova-%d.conf' % len(os.listdir(
            self.tmp)))
        with open(path, 'w') as handle:
            handle.write(text)
        self.conf_path = path
        return conf.load_settings(conf.new_config([path]))

    def restart_with(self, text):
        """A configuration change: the service restarts on new settings."""
        self.sim.stop()
        self.sim.settings = self.settings(text)
        return self.sim.start()

    def claim(self, instance, specs):
        compute = self.sim.compute
        result = compute.claim(instance, hosts.flavor(compute, **specs))
        return [d.address for d in result.devices]

    def assertKept(self, report, addresses, instance):
        """Held, allocated, flagged missing and reported by the sync."""
        self.assertLessEqual(set(addresses), set(report.kept))
        devices = self.sim.devices()
        for address in addresses:
            dev = devices[address]
            self.assertEqual((Status.ALLOCATED, instance),
                             (dev.status, dev.instance_uuid))
            self.assertEqual('true', dev.extra_info.get('missing'))

    def cli_devices(self):
        """The CLI's ``devices`` table of this host (libvirt-test only)."""
        out = io.StringIO()
        code = cli.main(['--connection', self.sim.uri, '--config-file',
                         self.conf_path, '--state-dir', self.sim.state_dir,
                         'devices'], out=out, err=io.StringIO())
        self.assertEqual(0, code)
        return out.getvalue()

    def test_reboot_recreates_allocated_mdevs_in_place(self):
        with self.record('lifecycle', 'host reboot (every mdev vanishes) '
                         'with 2 instances holding 3 vGPUs on 2 parents, one '
                         'released before (%s)' % self.hypervisor,
                         'allocated mdevs recreated: same UUIDs, same '
                         'parents and types; free ones not; holdings '
                         'unchanged; a second sync recreates nothing') \
                as row:
            held_a = self.claim(A, {'pci_passthrough:alias': 'vgpu:2',
                                    'hw:numa_nodes': '1'})
            held_b = self.claim(B, {'pci_passthrough:alias': 'vgpu:1'})
            self.claim(C, {'pci_passthrough:alias': 'vgpu:1'})
            self.sim.compute.release(C)
            kernel = self.sim.kernel_mdevs()
            allocated = {u: kernel[u] for u in held_a + held_b}
            holdings = self.sim.held()
            for reboot in range(2):
                row.cases += 1
                _report, recreated = self.sim.reboot()
                self.assertEqual(sorted(allocated),
                                 sorted(recreated.recreated))
                self.assertEqual({}, recreated.failed)
                self.assertEqual(allocated, self.sim.kernel_mdevs())
                self.assertEqual(holdings, self.sim.held())
                _report, again = self.sim.compute.sync()
                self.assertEqual([], again.recreated)
            # The released instance's capacity is still there.
            self.assertEqual(3, len(self.claim(C, {
                'pci_passthrough:alias': 'vgpu:3'})))

    def test_whitelist_drops_allocated_devices(self):
        with self.record('lifecycle', 'config change: the device_spec no '
                         'longer covers an allocated vGPU and VF; then a '
                         'reboot (%s)' % self.hypervisor,
                         'allocations kept and reported (kept, MISSING) '
                         'until released, mdev recreated on reboot; '
                         'released devices leave the tracker; restoring '
                         'the spec gives everything back') as row:
            row.cases += 1
            held = self.claim(A, {'pci_passthrough:alias': 'vgpu:1,vf:1'})
            kernel = self.sim.kernel_mdevs()
            self.restart_with(NO_GPU_NO_VF)
            report, _recreated = self.sim.compute.sync()
            self.assertKept(report, held, A)
            self.assertRaises(exception.RequestNotSatisfiable,
                              self.claim, B, {'pci_passthrough:alias':
                                              'vgpu:1'})
            if self.sim.uri:
                self.assertIn('MISSING from host', self.cli_devices())
            row.cases += 1
            report, recreated = self.sim.reboot()
            self.assertKept(report, held, A)
            self.assertEqual({u: kernel[u] for u in held if u in kernel},
                             {u: v for u, v in self.sim.kernel_mdevs().items()
                              if u in held})
            freed = self.sim.compute.release(A)
            self.assertEqual(sorted(held), sorted(d.address for d in freed))
            self.assertFalse(set(held) & set(self.sim.devices()))
            self.restart_with(worlds.NOVA_CONF)
            self.assertEqual(8, len(self.claim(B, {
                'pci_passthrough:alias': 'vgpu:8'})))

    def test_parent_type_changes_under_an_allocation(self):
        with self.record('lifecycle', 'config change: an allocated vGPU\'s '
                         'parent now exposes another type (%s)'
                         % self.hypervisor, 'allocation kept and reported '
                         'until released; the parent offers the new type; '
                         'the old mdev is never handed out again') as row:
            row.cases += 1
            held = self.claim(A, {'pci_passthrough:alias': 'vgpu:8'})
            devices = self.sim.devices()
            on_gpu0 = [u for u in held if devices[u].parent_addr == GPU0]
            self.restart_with(GPU0_AS_36)
            report, _recreated = self.sim.compute.sync()
            self.assertTrue(on_gpu0)
            self.assertKept(report, on_gpu0, A)
            parent = self.sim.devices()[GPU0]
            self.assertEqual('nvidia-36', parent.mdev_type)
            if self.sim.uri:
                self.assertIn('MISSING from host', self.cli_devices())
            self.sim.compute.release(A)
            devices = self.sim.devices()
            self.assertFalse(set(on_gpu0) & set(devices))
            self.assertLessEqual(
                {d.mdev_type for d in devices.values()
                 if d.parent_addr == GPU0}, {'nvidia-36'})
            self.assertGreater(capacity.usable(devices[GPU0]), 0)
            # Only GPU1's four nvidia-35 slots serve vgpu now.
            got = self.claim(B, {'pci_passthrough:alias': 'vgpu:4'})
            self.assertEqual(4, len(got))
            self.assertFalse(set(on_gpu0) & set(got))
            self.assertRaises(exception.RequestNotSatisfiable, self.claim,
                              C, {'pci_passthrough:alias': 'vgpu:1'})

    def _unplug(self, address, held):
        """The parent disappears: libvirt stops listing it (and its mdevs)
        and the kernel refuses to create anything on it (the fake kernel
        cannot lose a device, so it refuses the held UUIDs with ENODEV)."""
        self.sim.stop()
        self.fake.remove_device(address)
        if self.sim.hypervisor == harness.FAKE:
            for uuid in held:
                self.sim.udev.refuse[uuid] = errno.ENODEV
        else:
            harness.write_test_driver_host(self.fake, self.sim.state_dir)
        return self.sim.start()

    def test_parent_disappears_under_an_allocation(self):
        with self.record('lifecycle', 'an allocated vGPU\'s parent GPU '
                         'disappears; then a reboot (%s)' % self.hypervisor,
                         'allocation kept and reported until released; its '
                         'recreation fails and is reported; the other GPU '
                         'keeps serving') as row:
            row.cases += 1
            held = self.claim(A, {'pci_passthrough:alias': 'vgpu:1',
                                  'hw:numa_nodes': '1'})
            parent = self.sim.devices()[held[0]].parent_addr
            other = GPU1 if parent == GPU0 else GPU0
            self._unplug(parent, held)
            report, _recreated = self.sim.compute.sync()
            self.assertKept(report, held, A)
            self.assertNotIn(parent, self.sim.devices())
            tree = self.sim.compute.provider_tree()
            self.assertEqual([other], [p.device_address
                                       for p in tree.children])
            if self.sim.uri:
                self.assertIn('MISSING from host', self.cli_devices())
            row.cases += 1
            report, recreated = self.sim.reboot()
            self.assertKept(report, held, A)
            self.assertEqual(held, sorted(recreated.failed))
            self.assertIn(parent, str(recreated.failed[held[0]]))
            self.assertEqual(4, len(self.claim(B, {
                'pci_passthrough:alias': 'vgpu:4'})))
            freed = self.sim.compute.release(A)
            self.assertEqual(held, [d.address for d in freed])
            self.assertNotIn(held[0], self.sim.devices())
            self.assertEqual({B}, set(self.sim.held()))


class PersistentMdevRebootTest(recorder.HardeningTestCase):
    """The libvirt node-device backend defines persistent mdevs."""

    def test_reboot_with_persistent_mdevs(self):
        with self.record('lifecycle', 'host reboot with mdevs created '
                         'through libvirt node devices (persistent, '
                         'autostart) and a transient one',
                         'persistent mdevs come back by themselves, the '
                         'transient one is recreated with its UUID; '
                         'holdings unchanged') as row:
            row.cases += 1
            self.useFixture(fixtures.FakeLogger())
            host = self.useFixture(compute_fixture.ComputeFixture(
                'life', worlds.NOVA_CONF, hosts.two_gpus))
            # A transient mdev held by an instance (made through sysfs).
            host.compute.claim(A, hosts.vgpus(host.compute, 1))
            compute = hosts.compute_on(host, libvirt_backend=True)
            result = compute.claim(B, hosts.vgpus(compute, 3))
            before = hosts.held(compute)
            persistent = {d.address for d in result.devices
                          if d.address in result.created_mdevs}
            self.assertTrue(persistent)
            host.fake.reboot()
            active = {u for u, v in hosts.libvirt_mdevs(host.fake).items()
                      if v[2]}
            self.assertEqual(persistent, active)
            compute = hosts.compute_on(host, libvirt_backend=True)
            _report, recreated = compute.sync()
            self.assertEqual(sorted(before[A]), sorted(recreated.recreated))
            self.assertEqual(before, hosts.held(compute))
            mdevs = hosts.libvirt_mdevs(host.fake)
            for address in before[A] + before[B]:
                self.assertTrue(mdevs[address][2], address)
