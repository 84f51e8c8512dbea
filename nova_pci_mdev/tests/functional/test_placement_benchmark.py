"""The Placement benchmark's smoke run: ``python -m benchmarks.placement
--quick`` against the real openstack-placement, as the full run does.

It must answer every query of its subset with the candidates Placement
owes (shape b: 4 GPUs of 16 mdevs; shape a per GPU: 8 GPUs of 16; N
one-unit groups with group_policy none give every ordered choice of N
providers, each provider possibly more than once: providers ** N), measure
each in a child of its own (CPU and peak RSS of that child), and write its
section into RESULTS.md without touching the rest of the file.
"""

import json
import os
import subprocess
import sys

import fixtures
import testtools

from benchmarks import sections

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class PlacementBenchmarkSmokeTest(testtools.TestCase):

    def test_quick_run(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        results_md = os.path.join(tmp, 'RESULTS.md')
        raw = os.path.join(tmp, 'raw.json')
        with open(results_md, 'w') as f:
            f.write('# Benchmarks\n\nthe tracker tables\n')
        done = subprocess.run(
            [sys.executable, '-m', 'benchmarks.placement', '--quick',
             '--nova-python', '', '--output', results_md, '--json', raw],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        with open(raw) as f:
            results = json.load(f)
        found = {}
        for case in results['cases']:
            for run in case['runs']:
                self.assertEqual('ok', run['status'], case)
                self.assertGreater(run['cpu'], 0)
                self.assertGreater(run['rss_kib'], 10000)
            found[(case['shape'], case['n'], case['settings'])] = (
                case['runs'][0]['candidates'])
        self.assertEqual({('b', 1, 'defaults'): 4, ('b', 2, 'defaults'): 16,
                          ('b', 1, 'wide'): 4, ('b', 2, 'wide'): 16,
                          ('a', 1, 'defaults'): 8, ('a', 2, 'defaults'): 64,
                          ('a', 1, 'wide'): 8, ('a', 2, 'wide'): 64},
                         found)
        with open(results_md) as f:
            text = f.read()
        self.assertTrue(text.startswith('# Benchmarks\n\nthe tracker '
                                        'tables\n'))
        section = sections.extract(text, 'placement')
        self.assertIn('| b | 1 | per-GPU (= per-parent) | 2 | unset → none '
                      '| defaults | 16 |', section)
