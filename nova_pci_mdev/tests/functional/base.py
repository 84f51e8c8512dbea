"""Test case bases of the functional suite: a cloud per test, assertions
on device state per host."""

import testtools

from nova_pci_mdev.objects import fields
from nova_pci_mdev.tests.functional import checks
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds
from nova_pci_mdev.virt.libvirt import config as vconfig

Status = fields.PciDeviceStatus


class CloudTestCase(testtools.TestCase):
    """A :class:`~.cloud.Cloud` on :attr:`nova_conf` per test."""

    placement = False
    nova_conf = worlds.NOVA_CONF

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(cloud_mod.Cloud(
            self.nova_conf, placement=self.placement))

    def verify(self):
        """Every invariant of :mod:`.checks` on every host that is up."""
        checks.verify(self.cloud)

    @staticmethod
    def host_view(sim):
        """Device state, kernel mdevs and domains of one host, as one
        comparable value."""
        return (sim.state(), sim.kernel_mdevs(),
                sorted(sim.fake.domains) if sim.keeps_domains else None)

    def snapshot_all(self):
        """:meth:`host_view` of every host that is up."""
        return {name: self.host_view(sim)
                for name, sim in sorted(self.cloud.hosts.items()) if sim.up}


class ScenarioTestCase(CloudTestCase):
    """Scenarios get ``self.kind`` (a :class:`worlds.Kind`) from
    testscenarios and two hosts of :func:`worlds.two_hosts`."""

    kind = worlds.MDEV
    #: Extra FakeHost arguments of the two hosts (e.g. versions).
    host_args = {}

    def setUp(self):
        super().setUp()
        self.host1, self.host2 = worlds.two_hosts(self.cloud, self.kind,
                                                  **self.host_args)

    # -- assertions on one host ---------------------------------------------

    def assertHolds(self, sim, consumer, count, dev_type=None):
        """``consumer`` holds ``count`` allocated devices of ``dev_type``
        (the kind's child type by default) on ``sim``; returns them."""
        dev_type = dev_type or self.kind.child_type
        devices = [d for d in sim.devices().values()
                   if d.instance_uuid == consumer]
        self.assertEqual(
            [(dev_type, Status.ALLOCATED)] * count,
            [(d.dev_type, d.status) for d in devices],
            'devices of %s on %s' % (consumer, sim.name))
        return devices

    def assertAllFree(self, sim):
        """No device of ``sim`` is held or blocked; no record is kept."""
        state = sim.state()
        self.assertEqual({a: Status.AVAILABLE for a in state},
                         {a: s for a, (_t, s, _i) in state.items()})
        self.assertEqual({}, sim.compute.snapshot().instances)

    def assertMdevsOf(self, sim, devices):
        """The kernel of ``sim`` has the mdev of every slot in
        ``devices`` on the slot's parent (nothing for VFs)."""
        kernel = sim.kernel_mdevs()
        for dev in devices:
            if dev.dev_type == fields.PciDeviceType.MDEV_VF:
                self.assertEqual((dev.parent_addr, dev.mdev_type),
                                 kernel.get(dev.address))
        if not self.kind.is_mdev:
            self.assertEqual({}, kernel)

    def assertDomain(self, sim, inst, devices):
        """``inst``'s guest on ``sim`` has one hostdev per device."""
        want = [vconfig.LibvirtConfigGuestHostdevMDEV(uuid=d.address)
                if d.dev_type == fields.PciDeviceType.MDEV_VF else
                vconfig.LibvirtConfigGuestHostdevPCI(
                    address=d.address, managed=not self.kind.is_vgpu_vf)
                for d in devices]
        self.assertEqual(sorted(map(repr, want)),
                         sorted(map(repr, self.cloud.domains[sim.name][
                             inst.uuid].hostdevs)))
        if sim.keeps_domains:
            self.assertEqual(sorted(map(repr, want)), sorted(map(
                repr, sim.domains()[inst.name].hostdevs)))

    def assertNotContacted(self, sim, before):
        self.assertEqual(before, sim.contacts(),
                         '%s was contacted while down' % sim.name)
