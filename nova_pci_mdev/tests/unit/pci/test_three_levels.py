"""Three levels (issue 13): PF -> VF parent (``mdev-pf``) -> mdev slot.

On NVIDIA Ampere and later every VF of a GPU is itself an mdev parent. The
host::

    0000:41:00.0  type-PF   (the GPU, passable whole)
      |- 0000:41:00.4  mdev-pf nvidia-A   '- SLOT_A (existing mdev)
      |- 0000:41:00.5  mdev-pf nvidia-A   (one slot still to create)
      '- 0000:41:00.6  type-VF            (a plain VF)

A hypothesis state machine claims whole PFs, VF parents, slots and plain
VFs, by request and by address, allocates, frees and restarts through a
real store, and checks after every step, with rules written here
independently of the tracker:

* no device is held twice, and the owners are those the claims returned;
* a PF in use has nothing in use below it; a VF parent in use has no slot
  in use and its PF is not in use; a slot in use has neither its VF parent
  nor its PF in use;
* every free device's status follows from its ancestors and descendants;
* the pools count exactly the claimable devices and slots still to create
  (a PF is in them only while nothing below it is in use, nothing below
  a PF in use is); when nothing is held, everything is free again.
"""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import three_levels as three
from nova_pci_mdev.virt.libvirt import records as records_mod


class ThreeLevelTest(testtools.TestCase):

    def test_pf_whole_waits_for_every_vf_and_slot(self):
        tracker = three.new_tracker()
        tracker.sync(three.host_records())
        tracker.claim_devices(three.INSTANCES[0], [three.SLOT_A])
        self.assertRaises(exception.NovaPciMdevException,
                          tracker.claim_devices, three.INSTANCES[1], [three.PF])
        self.assertEqual(three.S.UNCLAIMABLE, tracker.devices[three.PF].status)
        tracker.free_instance(three.INSTANCES[0])
        tracker.claim_devices(three.INSTANCES[1], [three.PF])
        for address in (three.VFP_A, three.VFP_B, three.VF, three.SLOT_A):
            self.assertEqual(three.S.UNCLAIMABLE, tracker.devices[address].status)
        self.assertEqual(0, capacity.usable(tracker.devices[three.VFP_B]))
        self.assertRaises(exception.NovaPciMdevException,
                          tracker.claim_slots, three.INSTANCES[2], three.VFP_B, 1)


class ThreeLevelRecordsTest(testtools.TestCase):

    def test_an_mdev_capable_vf_sits_below_its_pf(self):
        from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X
        from nova_pci_mdev.tests.fixtures import host_doubles
        from nova_pci_mdev.virt.libvirt import nodedev
        vf = X.pci(three.VFP_A, vendor='10de', product='2236', numa=0,
                   parent=X.node_name(three.PF), extra=(
                       "<capability type='phys_function'>%s</capability>%s"
                       % (X.address_attrs(three.PF),
                          X.mdev_types(('nvidia-A', None, 1)))))
        devices = [nodedev.parse_node_device(x) for x in (
            X.pf(three.PF, [three.VFP_A], vendor='10de', product='2236', numa=0), vf)]
        found = {r['address']: r for r in records_mod.build_records(
            three.NODE, devices, host_doubles.StubSettings(
                host_doubles.Options('nvidia-A')))}
        self.assertEqual((three.T.MDEV_PF, three.PF, three.PF),
                         (found[three.VFP_A]['dev_type'],
                          found[three.VFP_A]['parent_addr'],
                          found[three.VFP_A]['extra_info']['phys_function']))
        tracker = three.new_tracker()
        tracker.sync(list(found.values()))
        self.assertIs(tracker.devices[three.PF], tracker.devices[three.VFP_A]
                      .parent_device)
