"""The benchmark's same-objects host and its instruction-count report
(benchmarks.hostgen, benchmarks.report; no workload is run)."""

import testtools

from benchmarks import hostgen
from benchmarks import report


class SameObjectsHostTest(testtools.TestCase):

    def test_one_record_per_object_nova_holds(self):
        fewer = hostgen.generate(1000)
        same = hostgen.generate(1000, existing=hostgen.SLOTS_PER_GPU)
        self.assertEqual(1000, len(hostgen.records(same)))
        self.assertLess(len(hostgen.records(fewer)), 1000)
        # Nova lists every slot, existing or not: the same device list.
        self.assertEqual(hostgen.nova_devices(fewer),
                         hostgen.nova_devices(same))
        self.assertEqual(1000, len(hostgen.nova_devices(same)))


class InstructionsReportTest(testtools.TestCase):

    RESULTS = {'instructions': {
        'ours': {'1000': {'first_sync': 1e8, 'floor_resync': 1e6,
                          'resync_nochange': 2e6, 'records': 571},
                 '10000': {'first_sync': 1e9, 'floor_resync': 1e7,
                           'resync_nochange': 3e7, 'records': 5716}},
        'baseline': {'commit': 'fcd5485' + '0' * 33,
                     '10000': {'first_sync': 5e8}}}}

    def test_exponents_and_floor_ratios_are_from_the_counts(self):
        counts = report.Instructions(self.RESULTS)
        self.assertAlmostEqual(1.0, counts.exponent('ours', 'first_sync'))
        self.assertEqual(1e9, counts.value('ours', 'first_sync', 10000))
        self.assertEqual(5e8, counts.value('baseline', 'first_sync', 10000))
        text = '\n'.join(report._instructions(self.RESULTS))
        self.assertIn('| first_sync | 100M | 1.0G | 175K | 1.00 | 500M | '
                      '+100% |', text)
        self.assertIn('resync_nochange / its floor at 10,000: 3.0x', text)


class SameObjectsFirstSyncTest(testtools.TestCase):
    """The sentence under the same-objects table says whether the first
    sync's Nova target holds on the same objects, from the run's medians."""

    class Medians(object):
        def __init__(self, values):
            self.values = values

        def median(self, side, name, n):
            return self.values.get((side, name, n))

    def sentence(self, ours_same):
        tracker = self.Medians({
            ('ours', 'first_sync', 'same'): ours_same,
            ('ours', 'first_sync', 10000): 0.2,
            ('nova', 'first_sync', 10000): 14.0})
        return ' '.join(report._same_first_sync(tracker, 10000))

    def test_not_met(self):
        text = self.sentence(0.4)
        self.assertIn('35x faster than Nova', text)
        self.assertIn('(70x), is **not met** on the same objects', text)

    def test_met(self):
        self.assertIn('is met on the same objects', self.sentence(0.25))
