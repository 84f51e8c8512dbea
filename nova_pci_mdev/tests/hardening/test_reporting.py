"""The instruments themselves: rows, the rendered table, the ledger."""

import json
import os

import fixtures
import testtools

from nova_pci_mdev.tests.fixtures import ledger as ledger_mod
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import render


class RecorderTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.results = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(recorder.RESULTS_ENV,
                                                     self.results))

        class Probe(recorder.HardeningTestCase):
            def test_probe(self):
                pass

        self.probe = Probe('test_probe')

    def rows(self):
        return render.load_rows(self.results)

    def test_rows_held_failed_and_empty(self):
        with self.probe.record('fault', 'ok', 'fine') as row:
            row.cases += 3

        def boom():
            with self.probe.record('fault', 'bad', 'fine') as row:
                row.cases += 1
                raise ValueError('it broke\nhere')

        self.assertRaises(ValueError, boom)

        def empty():
            with self.probe.record('paths', 'nothing', 'fine'):
                pass

        self.assertRaises(AssertionError, empty)
        got = {r['subject']: (r['status'], r['cases']) for r in self.rows()}
        self.assertEqual({'ok': ('held', 3),
                          'bad': ('FAILED: ValueError: it broke here', 1),
                          'nothing': ('FAILED: no case was run', 0)}, got)

    def test_unknown_area_is_refused(self):
        def bad_area():
            with self.probe.record('elsewhere', 's', 'o'):
                pass
        self.assertRaises(ValueError, bad_area)

    def test_nothing_written_without_the_variable(self):
        self.useFixture(fixtures.EnvironmentVariable(recorder.RESULTS_ENV))
        with self.probe.record('fault', 'ok', 'fine') as row:
            row.cases += 1
        self.assertEqual([], os.listdir(self.results))

    def test_render_has_a_line_per_row_and_lists_findings(self):
        rows = [dict(area='crash', subject='kill | there', outcome='o',
                     test='a.b.C.test_x', cases=2, status='held',
                     mode='full'),
                dict(area='fuzz', subject='parser', outcome='o',
                     test='a.b.C.test_y(fake)', cases=300,
                     status='FAILED: ValueError: x', mode='full')]
        text = render.render(rows)
        self.assertIn('| 1 | kill \\| there | 2 | o | held | `b.C.test_x` |',
                      text)
        self.assertIn('**FAILED: ValueError: x**', text)
        self.assertIn('2 things tried, 302 cases in all; 1 held, 1 did not',
                      text)
        self.assertLess(text.index('## Bad input'), text.index('## Processes'))
        findings = text[text.index('## Findings'):]
        self.assertIn('parser: FAILED: ValueError: x', findings)
        self.assertNotIn('kill', findings)

    def test_render_main(self):
        with open(os.path.join(self.results, 't.jsonl'), 'w') as handle:
            handle.write(json.dumps(dict(
                area='fault', subject='s', outcome='o', test='t', cases=1,
                status='held', mode='light')) + '\n')
        out = os.path.join(self.results, 'out.md')
        self.assertEqual(0, render.main([self.results, out]))
        with open(out) as handle:
            self.assertIn('| 1 | s | 1 | o | held | `t` |', handle.read())


class LedgerTest(testtools.TestCase):
    """The concurrency test's ledger must see a double allocation."""

    def test_conflicts(self):
        path = self.useFixture(fixtures.TempDir()).join('ledger.json')
        ledger = ledger_mod.Ledger(path)
        slot = {'address': 'u1', 'parent_addr': 'gpu', 'dev_type': 'mdev-vf'}
        gpu = {'address': 'gpu', 'parent_addr': None, 'dev_type': 'mdev-pf'}
        self.assertEqual([], ledger.take('i1', [slot]))
        self.assertEqual(1, len(ledger.take('i2', [slot])))
        ledger.give_back('i2')
        ledger.give_back('i1')
        self.assertEqual({}, ledger.holdings())
        self.assertEqual([], ledger.take('i1', [slot]))
        self.assertIn('children', ledger.take('i3', [gpu])[0])
        ledger.give_back('i1')
        other = dict(slot, address='u2')
        self.assertIn('held whole', ledger.take('i4', [other])[0])
        self.assertEqual({'i3': ['gpu'], 'i4': ['u2']}, ledger.holdings())
