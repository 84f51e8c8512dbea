"""tools/check-patches: a test step that stops finishing tests is killed.

The checker is a stdlib-only script, loaded here from its file. The
"stestr run" it watches is a real child process that prints two result
lines the way stestr does and then hangs, as a Nova functional worker did
when a thread outlived its test.
"""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import testtools

TOOL = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tools',
                    'check-patches')

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
    loader = importlib.machinery.SourceFileLoader('check_patches', TOOL)
    spec = importlib.util.spec_from_loader('check_patches', loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class WatchdogTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tool = load_tool()
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

    def test_run_that_ends_is_not_touched(self):
        _proc, (status, stalled) = self.watch(FINISHES, stall_seconds=60)
        self.assertEqual((0, ''), (status, stalled))
