"""The work benchmarks/placement_work.py computes is the work Placement
does: each query runs on the real openstack-placement (the benchmark's own
server, a forked child per query) under cProfile, and the calls it made
are compared with the counts computed from the tree, the query and the
settings before sending it.

- products: one ``_satisfies_group_policy`` call per complete product
  ``_merge_candidates`` takes: equal;
- partial products: one ``_exceeds_capacity`` call per partial product the
  wide-tree generator checks (``should_skip`` with patch 0002): equal;
- comparisons: the computed k*(k-1)/2 per hash equals the pairs of the
  answer's allocation requests that differ in their mappings only (the
  pairs stock Placement's hash puts together; at most that many where
  ``limit`` cut the answer); its
  ``AllocationRequest.__eq__`` calls are at least that many (CPython's
  probe sequence may pass an entry more than once, how often depends on
  the per-process hash seed), and 0 with patch 0001;
- candidates: the response's.

On a tree small enough to walk whole: 2 hosts of 3 SR-IOV GPUs x 2 VF
parents x 2 mdevs (per VF parent: 6 providers of 2; per GPU: 3 of 4),
vGPU:1 to vGPU:4, both group policies, Placement's defaults, the wide-tree
settings and depth-first with the wide-tree generator, both with
``max_allocation_candidates = 7`` so that the walk stops inside a host
(round-robin and host after host).
"""

import dataclasses
import os

import fixtures
import testtools

from benchmarks import placement
from benchmarks import placement_trees as trees
from benchmarks import placement_work as work

SHAPE = trees.Shape('t', '2 hosts x 3 SR-IOV GPUs x 2 VF parents x 2 mdevs',
                    gpus=3, vfs=2, instances=2, mdev_type='nvidia-699',
                    hosts=2, pf_bus=0x41)
SETTINGS = {
    'defaults': {},
    'wide, 7': dict(placement.SETTINGS['wide'], max_allocation_candidates=7),
    'depth-first wide tree, 7': {'max_allocation_candidates': 7,
                                 'optimize_for_wide_provider_trees': True},
}
COUNTS = (1, 2, 3, 4)


class PlacementWorkTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('TMPDIR', self.tmp))

    def check(self, patches, settings, policies=trees.POLICIES):
        copy = (placement.patched_copy(self.tmp, placement.placement_patches(
            patches)) if patches else None)
        checked = 0
        for model in trees.MODELS:
            server = placement.Server(
                os.path.join(self.tmp, '%d-%s.db' % (patches, model)), copy)
            self.addCleanup(server.close)
            server.ask('build', shape=dataclasses.asdict(SHAPE), model=model)
            for n in COUNTS:
                for policy in policies:
                    for name in settings:
                        what = (patches, model, n, policy, name)
                        reply = server.ask(
                            'query', query=trees.query_string(SHAPE, n, policy),
                            settings=SETTINGS[name], timeout=60,
                            memory_mb=placement.MEMORY_MB, profile=True)
                        self.assertEqual('ok', reply['status'], what)
                        want = work.for_case(SHAPE, model, n, policy,
                                             'groups', SETTINGS[name],
                                             patches)
                        calls = reply['calls']
                        partials = (calls['should_skip'] or
                                    calls['_exceeds_capacity'])
                        self.assertEqual(
                            (want.products, want.partials, want.candidates),
                            (calls['_satisfies_group_policy'], partials,
                             reply['candidates']), what)
                        if patches:
                            self.assertEqual((0, 0), (
                                want.comparisons, calls['__eq__']), what)
                        elif want.kept == want.candidates:
                            self.assertEqual(want.comparisons,
                                             reply['mapping_only_pairs'],
                                             what)
                        else:   # the answer is the first `limit` kept
                            self.assertLessEqual(reply['mapping_only_pairs'],
                                                 want.comparisons, what)
                        self.assertLessEqual(want.comparisons,
                                             calls['__eq__'], what)
                        checked += 1
        return checked

    def test_stock_placement(self):
        self.assertEqual(2 * 4 * 2 * 3, self.check(0, SETTINGS))

    def test_with_patches_0001_and_0002(self):
        # 0002 prunes isolate on partial products of the wide-tree
        # generator; 0001 leaves no comparison
        self.assertEqual(2 * 4 * 2, self.check(
            2, ('defaults', 'wide, 7'), policies=('isolate',)))
