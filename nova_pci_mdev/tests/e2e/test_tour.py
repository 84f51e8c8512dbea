"""The README's first command: ``tools/tour`` after the bootstrap.

The tour is run as an operator runs it (``bash tools/tour``, the console
script of this environment, the default state directory under a temporary
``$XDG_STATE_HOME``), twice, with a tour stopped between its claim and its
release in between.
"""

import io
import json
import os
import re
import subprocess
import sys

import fixtures
import testtools

from nova_pci_mdev.cmd import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TOUR = os.path.join(REPO, 'tools', 'tour')
INSTANCE = '7e1a0b2c-0d3f-4a5b-8c6d-9e0f1a2b3c4d'     # the tour's own
HEADINGS = (
    ("the sample host's devices, as a NUMA node -> parent -> slot tree",
     'devices', 'host sample-compute: 12 devices'),
    ("a vGPU claimed exactly like an SR-IOV VF, and the guest's <hostdev>",
     'claim --instance %s --extra-spec pci_passthrough:alias=vGPU:1'
     % INSTANCE, 'instance %s claimed 1 device(s)' % INSTANCE),
    ('the Placement inventory the host would report (the claimed vGPU '
     'reserved)', 'inventory', 'compute node sample-compute'),
    ('the release of that vGPU: the sample host is as the tour found it',
     'release --instance %s' % INSTANCE,
     'instance %s released 1 device(s)' % INSTANCE))


class TourTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.xdg = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'xdg')
        self.useFixture(fixtures.EnvironmentVariable('XDG_STATE_HOME',
                                                     self.xdg))

    def tour(self):
        # The console script of this environment, when the checkout has no
        # .venv of its own (a tox environment).
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) +
                   os.pathsep + os.environ.get('PATH', ''))
        proc = subprocess.run(['bash', TOUR], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL,
                              timeout=300)
        self.assertEqual((0, ''), (proc.returncode, proc.stderr),
                         proc.stdout)
        return proc.stdout

    def held(self):
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(0, cli.main(['--format', 'json', 'devices'],
                                     out=out, err=err), err.getvalue())
        return [d['address'] for d in json.loads(out.getvalue())
                if d['instance_uuid']]

    def assert_steps(self, out):
        """Four steps, each a heading saying what it shows, the command,
        then that command's output."""
        steps = re.split(r'\n*^== (\d)/4: ', out, flags=re.M)
        self.assertEqual('', steps[0], out)
        self.assertEqual(['1', '2', '3', '4'], steps[1::2])
        for (title, command, first), text in zip(HEADINGS, steps[2::2]):
            lines = text.splitlines()
            self.assertEqual([title, '$ nova-pci-mdev ' + command],
                             lines[:2])
            self.assertTrue(lines[2].startswith(first), lines[2])

    def test_tour_twice_and_after_a_stop(self):
        first = self.tour()
        self.assert_steps(first)
        self.assertEqual([], self.held())
        # The same again: the tour left the host as it found it.
        self.assertEqual(first, self.tour())
        # A tour stopped between its claim and its release: the next one
        # releases first, says so, and runs as the first did.
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(0, cli.main(
            ['claim', '--instance', INSTANCE, '--extra-spec',
             'pci_passthrough:alias=vGPU:1'], out=out, err=err),
            err.getvalue())
        self.assertEqual(1, len(self.held()))
        note, rest = self.tour().split('\n\n', 1)
        self.assertRegex(note, r'^\(an earlier tour stopped before its '
                         r'release; now done: instance %s released 1 '
                         r'device\(s\): [0-9a-f-]{36}\)$' % INSTANCE)
        self.assertEqual(first, rest)
        self.assertEqual([], self.held())
