"""A claim is all of the request or nothing (issue 31), over random
three-level hosts.

Each host is a small forest drawn by hypothesis::

    PF 0000:4N:00.0   type-PF, or mdev-pf nvidia-P (slots, some to create)
      |- 0000:4N:00.K mdev-pf nvidia-P or nvidia-V (slots, some to create)
      |    '- mdev slots (existing)
      '- 0000:4N:00.K type-VF (a plain VF)

Some devices are held by another instance first; then one instance claims
one or two requests (aliases naming ``mdev-pf``, an mdev type, a plain VF,
the PF, or two of these ORed). Checked, with rules written here and not
read from the tracker:

* a claim that succeeds returns exactly the requested count per request,
  each device once, no two of them (nor one of them and a held device)
  ancestor and descendant;
* a claim that fails changes nothing;
* a single request fails only when the host cannot hold it at all: the
  largest set of free candidates none of which is above another
  (:func:`most_together`, a walk down the forest) is smaller than the
  count, and succeeds whenever it is not.

Before the fix, alias ``device_type: mdev-pf`` on a PF whose VFs are mdev
parents too got the PF alone (it blocks its VFs) and ``claimed 1
device(s)`` for ``:2``, ``:3``, ``:5``.
"""

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import claim_counts as counts
from nova_pci_mdev.tests.fixtures import tracker_world as world


class ClaimCountTest(testtools.TestCase):

    def test_pf_and_vf_parents_one_alias(self):
        """The issue's host: alias mdev-pf on a PF with mdev_types whose
        VFs have mdev_types too."""
        gpu = dict(vendor_id='10de', product_id='2236', numa_node=0)
        pf = '0000:41:00.0'
        records = [world.record(pf, counts.T.MDEV_PF, mdev_type='nvidia-P',
                                creatable='4', **gpu)]
        for fn in range(1, 5):
            records.append(world.record(
                '0000:41:00.%d' % fn, counts.T.MDEV_PF, parent_addr=pf,
                phys_function=pf, mdev_type='nvidia-V', creatable='1',
                **dict(gpu, product_id='2237')))
        for count in (1, 2, 3, 4):
            tracker = counts.new_tracker(records)
            devs = tracker.claim_instance(counts.CLAIMER, [world.request(
                count=count, alias_name='whole', dev_type=counts.T.MDEV_PF)])
            self.assertEqual(count, len(devs))
            self.assertNotIn(pf, [d.address for d in devs])
        tracker = counts.new_tracker(records)
        before = world.snapshot(tracker)
        exc = self.assertRaises(
            exception.PciDeviceRequestFailed, tracker.claim_instance,
            counts.CLAIMER, [world.request(count=5, alias_name='whole',
                                           dev_type=counts.T.MDEV_PF)])
        self.assertIn('alias whole: 5 free mdev-pf devices', str(exc))
        self.assertIn('5 requested (only 4 can be taken together', str(exc))
        self.assertEqual(before, world.snapshot(tracker))

    @hypothesis.settings(max_examples=150, deadline=None, database=None,
                         derandomize=True)
    @hypothesis.given(st.data())
    def test_every_claim_is_all_or_nothing(self, data):
        counts.check_claim(data)
