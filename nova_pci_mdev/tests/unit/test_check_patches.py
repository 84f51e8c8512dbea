"""tools/check-patches: the watchdog of a test step, the spawn smoke stage.

The checker is a stdlib-only script, loaded here from its file. A test
step that stops finishing tests is killed: the "stestr run" it watches is a
real child process that prints two result lines the way stestr does and
then hangs, as a Nova functional worker did when a thread outlived its
test. The spawn smoke runs against a stand-in for stestr, a real child
process too, in a temporary tree.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

import fixtures
import testtools

from nova_pci_mdev.tests.fixtures import output
from nova_pci_mdev.tests.fixtures import tools

HANGS = r'''
import sys, time
print("{0} nova.tests.A.test_one [1.0s] ... ok", flush=True)
print("{1} nova.tests.B.test_two [2.0s] ... FAILED", flush=True)
print("{1} nova.tests.B.test_three [0.5s] ... ok", flush=True)
time.sleep(30)   # a watchdog that does not kill fails the test
'''
FINISHES = r'''
print("{0} nova.tests.A.test_one [1.0s] ... ok", flush=True)
'''


def load_tool():
    return tools.load('check-patches')


class WatchdogTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tool = load_tool()
        # The tool's progress lines ("1 failed so far", "stalled") stay
        # out of the test run's output.
        self.output = self.useFixture(output.CapturedStreams())
        self.log = tempfile.NamedTemporaryFile(delete=False).name
        self.addCleanup(os.unlink, self.log)

    def watch(self, script, stall_seconds):
        with open(self.log, 'w') as out:
            proc = subprocess.Popen([sys.executable, '-c', script],
                                    stdout=out, start_new_session=True)
            self.addCleanup(lambda: proc.poll() is None and proc.kill())
            started = time.monotonic()
            result = self.tool.watch(proc, self.log, 'step', started,
                                     stall_seconds, poll=0.05)
        return proc, result

    def test_silent_run_is_killed_naming_the_worker(self):
        proc, (status, stalled) = self.watch(HANGS, stall_seconds=0.5)
        self.assertIsNotNone(proc.poll(), 'the hung run is still alive')
        self.assertNotEqual(0, status)
        # worker 0 went quiet first: its last result is the oldest line
        self.assertIn('worker 0 last finished nova.tests.A.test_one',
                      stalled)
        self.assertEqual((3, 1), self.tool.progress(self.log)[:2])
        self.assertIn('check-patches: step: 3 tests done, 1 failed so far',
                      self.output.stderr)
        self.assertIn('check-patches: step: stalled: no test finished',
                      self.output.stderr)

    def test_run_that_ends_is_not_touched(self):
        _proc, (status, stalled) = self.watch(FINISHES, stall_seconds=60)
        self.assertEqual((0, ''), (status, stalled))


# A stand-in for "python -m stestr ... run FILTER" in a Nova tree: it
# reports the one smoke test as stestr does when the smoke's file is in
# the tree, and the filter it was given.
FAKE_STESTR = r'''#!/bin/sh
case "$*" in *" init"*) exit 0;; esac
if [ -f nova/tests/functional/libvirt/test_mdev_alias_spawn.py ]; then
    echo "{0} nova.tests.functional.libvirt.test_mdev_alias_spawn.T.test_x [4.0s] ... ok"
    echo " - Passed: 1"
    echo " - Failed: 0"
else
    echo " - Passed: 0"
fi
echo "args: $*"
'''


class SpawnSmokeTest(testtools.TestCase):
    """The per-prefix spawn smoke stage of tools/check-patches."""

    def setUp(self):
        super().setUp()
        self.tool = load_tool()
        self.tool.TOTALS.update(passed=0, failed=0)
        self.output = self.useFixture(output.CapturedStreams())

    def test_mdev_dev_types_in_code_mean_the_driver_reports_mdevs(self):
        cases = [
            ('', False),
            # Nova 34.0.0 knows mdevs only through Placement
            ("mdevs = self._get_mediated_devices(types=types)\n", False),
            ("    # fields.PciDeviceType.MDEV_PF parents come later\n",
             False),
            ("if info['dev_type'] == fields.PciDeviceType.MDEV_PF:\n", True),
            ("x = 1\n        pci_device.dev_type == "
             "fields.PciDeviceType.MDEV_VF)\n", True),
            ("fields.PciDeviceType.MDEV_PFX\n", False),
        ]
        for source, expected in cases:
            self.assertEqual(expected, self.tool.reports_mdevs(source),
                             source)

    def test_module_filter_selects_exactly_that_module(self):
        regex = self.tool.module_filter(self.tool.SMOKE_TARGET)
        self.assertEqual(
            r'nova\.tests\.functional\.libvirt\.test_mdev_alias_spawn\.',
            regex)
        self.assertIsNotNone(re.match(
            regex, 'nova.tests.functional.libvirt.test_mdev_alias_spawn.'
            'MdevAliasSpawnSmokeTest.test_every_reported_mdev_is_attached'))
        self.assertIsNone(re.match(
            regex, 'nova.tests.functional.libvirt.test_mdev_alias_spawnX.T'))

    def test_table_has_a_smoke_column_dashed_before_it_applies(self):
        rows = [('0009-x', 'ok', 'ok', 'ok   9 passed (0m01s)', '-'),
                ('0010-longer-name', 'ok', 'ok', 'ok   10 passed (0m02s)',
                 'ok   1 passed, 0 failed (0m18s)'),
                ('final: pep8', '', 'ok', 'pep8 ok (3 files)', '')]
        lines = self.tool.table_lines(rows)
        self.assertEqual(2 + len(rows), len(lines))
        self.assertTrue(lines[0].startswith('patch'))
        self.assertTrue(lines[0].endswith('spawn smoke'))
        # the smoke column starts at the same place on every line
        column = lines[0].index('spawn smoke')
        self.assertEqual('-', lines[2][column:])
        self.assertEqual('ok   1 passed, 0 failed (0m18s)', lines[3][column:])
        self.assertEqual('', lines[4][column:])

    def fake_tree(self):
        tree = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(tree, 'nova/tests/functional/libvirt'))
        python = os.path.join(tree, 'fake-python')
        with open(python, 'w') as f:
            f.write(FAKE_STESTR)
        os.chmod(python, 0o755)
        return tree, python

    def test_smoke_runs_in_the_tree_and_leaves_it_as_it_was(self):
        tree, python = self.fake_tree()
        log = os.path.join(tree, 'smoke.log')
        ok, summary = self.tool.spawn_smoke(python, tree, log, 'step')
        self.assertTrue(ok, summary)
        self.assertIn('1 passed, 0 failed', summary)
        self.assertIn('check-patches: step: ok   1 passed, 0 failed',
                      self.output.stderr)
        self.assertEqual({'passed': 1, 'failed': 0}, self.tool.TOTALS)
        with open(log) as f:
            self.assertIn(
                r'run --concurrency 1 '
                r'nova\.tests\.functional\.libvirt\.test_mdev_alias_spawn\.',
                f.read())
        self.assertFalse(os.path.exists(
            os.path.join(tree, self.tool.SMOKE_TARGET)))

    def test_smoke_refuses_to_overwrite_a_file_of_the_tree(self):
        tree, python = self.fake_tree()
        target = os.path.join(tree, self.tool.SMOKE_TARGET)
        with open(target, 'w') as f:
            f.write('# Nova has a test of that name\n')
        error = self.assertRaises(self.tool.CheckError, self.tool.spawn_smoke,
                                  python, tree, os.devnull, 'step')
        self.assertIn(self.tool.SMOKE_TARGET, str(error))
        with open(target) as f:
            self.assertEqual('# Nova has a test of that name\n', f.read())


AGREES = r'''
import os
import unittest


class Agreement(unittest.TestCase):
    def test_sees_the_tree_and_nova_python(self):
        self.assertEqual(os.environ['EXPECTED_TREE'],
                         os.environ['NOVA_SERIES_TREE'])
        self.assertEqual('/nova/venv/bin/python',
                         os.environ['NOVA_SERIES_PYTHON'])
'''
SKIPS = r'''
import unittest


class Agreement(unittest.TestCase):
    @unittest.skip('NOVA_SERIES_TREE not usable')
    def test_skipped(self):
        pass
'''


class SeriesAgreementTest(testtools.TestCase):
    """The final state runs the library/series agreement test: a stand-in
    module, run by the real runner in a child Python, with the tree and
    Nova's Python in its environment.
    """

    def setUp(self):
        super().setUp()
        self.tool = load_tool()
        self.output = self.useFixture(output.CapturedStreams())
        self.repo = self.useFixture(fixtures.TempDir()).path
        self.tree = self.useFixture(fixtures.TempDir()).path
        self.log = os.path.join(self.tree, 'agreement.log')
        self.useFixture(fixtures.EnvironmentVariable(
            'EXPECTED_TREE', self.tree))

    def run_module(self, source, python=sys.executable):
        with open(os.path.join(self.repo, 'stand_in.py'), 'w') as f:
            f.write(source)
        return self.tool.series_agreement(
            '/nova/venv/bin/python', self.tree, self.log, 'step',
            python=python, repo=self.repo, test='stand_in')

    def test_passes_with_the_tree_and_nova_python_set(self):
        ok, summary = self.run_module(AGREES)
        self.assertTrue(ok, summary)
        self.assertIn('ok   1 passed, 0 failed', summary)
        self.assertEqual({'passed': 1, 'failed': 0}, self.tool.TOTALS)

    def test_a_skip_fails(self):
        ok, summary = self.run_module(SKIPS)
        self.assertFalse(ok)
        self.assertIn(
            'FAIL 0 passed, 0 failed, 1 skipped (counted as failed)',
            summary)
        self.assertEqual({'passed': 0, 'failed': 1}, self.tool.TOTALS)

    def test_not_run_without_a_python_of_the_project(self):
        ok, summary = self.run_module(AGREES, python=None)
        self.assertTrue(ok)
        self.assertIn('not run: no Python here imports nova_pci_mdev',
                      summary)
        self.assertEqual({'passed': 0, 'failed': 0}, self.tool.TOTALS)

    def test_applies_once_the_series_has_vgpu_vfs(self):
        self.assertFalse(self.tool.agreement_applies(self.tree))
        path = os.path.join(self.tree, self.tool.AGREEMENT_APPLIES)
        os.makedirs(os.path.dirname(path))
        open(path, 'w').close()
        self.assertTrue(self.tool.agreement_applies(self.tree))


class PrefixRangeTest(testtools.TestCase):
    """--prefixes: which prefixes a run checks, and the errors for a typo."""

    def setUp(self):
        super().setUp()
        self.tool = load_tool()
        self.output = self.useFixture(output.CapturedStreams())

    def test_range_is_inclusive_and_unset_means_every_prefix(self):
        args = self.tool.parse_args(['--prefixes', '17-29'])
        self.assertEqual((17, 29), args.prefixes)
        checked = [i for i in range(1, 31)
                   if self.tool.in_range(args.prefixes, i)]
        self.assertEqual(list(range(17, 30)), checked)
        everything = self.tool.parse_args([])
        self.assertIsNone(everything.prefixes)
        self.assertTrue(self.tool.in_range(everything.prefixes, 1))

    def test_a_bad_range_names_the_option_the_value_and_the_rule(self):
        for value in ('17', '29-17', '0-3', 'a-b', '3-4x'):
            self.assertRaises(SystemExit, self.tool.parse_args,
                              ['--prefixes', value])
            self.assertIn("--prefixes: '%s' is not FIRST-LAST with 1 <= "
                          "FIRST <= LAST" % value, self.output.stderr)

    def test_a_range_and_final_only_are_refused_together(self):
        self.assertRaises(SystemExit, self.tool.parse_args,
                          ['--prefixes', '1-3', '--final-only'])
        self.assertIn('--prefixes checks prefixes; --final-only checks none',
                      self.output.stderr)
