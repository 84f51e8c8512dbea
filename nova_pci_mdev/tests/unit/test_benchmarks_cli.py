"""benchmarks/cli.py measures the CLI child's own peak memory and CPU.

A child the benchmark runner started itself would report the runner's
peak RSS at least (Linux keeps a process's pre-exec high-water mark in its
``ru_maxrss``); the trampoline forks the command from a small interpreter.
"""

import os
import sys

import fixtures
import testtools

from benchmarks import cli

MIB = 1024


class MeasureTest(testtools.TestCase):

    def test_peak_rss_is_the_child_s_own_not_the_runner_s(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        ballast = bytearray(300 * MIB * MIB)        # the runner grows
        for at in range(0, len(ballast), 4096):
            ballast[at] = 1
        small = cli.measure(['/bin/true'], os.path.join(tmp, 'out'))
        big = cli.measure(
            [sys.executable, '-c',
             'b = bytearray(100 * 2 ** 20)\n'
             'for i in range(0, len(b), 4096): b[i] = 1'],
            os.path.join(tmp, 'out'))
        del ballast
        self.assertLess(small.rss_kib, 50 * MIB, small)
        self.assertGreater(big.rss_kib, 100 * MIB, big)
        self.assertLess(big.rss_kib, 200 * MIB, big)
        self.assertGreater(big.cpu, 0)
        self.assertGreaterEqual(big.wall, big.cpu / 2)

    def test_a_failing_command_is_named(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        exc = self.assertRaises(SystemExit, cli.measure, ['/bin/false'],
                                os.path.join(tmp, 'out'))
        self.assertIn('/bin/false exited 1', str(exc))
