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
