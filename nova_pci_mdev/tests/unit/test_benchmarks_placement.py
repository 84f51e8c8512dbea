"""The pure parts of the Placement benchmark (benchmarks/placement*.py).

The trees it builds, the query it sends (against a query string Nova
34.0.0 built itself), the RESULTS.md section it owns, and its verdict on
the bounds of issue 27.
"""

import testtools

from benchmarks import placement_report as report
from benchmarks import placement_trees as trees
from benchmarks import sections

#: Printed by ``benchmarks/.nova-venv/bin/python -m benchmarks.placement_nova
#: nvidia-699 2`` (Nova 34.0.0's own flavor -> RequestSpec -> request
#: filters -> resources_from_request_spec -> to_querystring), flavor
#: group_policy unset, with the request id Nova generated.
NOVA_REQUEST_ID = 'f77918ef-b38d-42d0-968c-70757f0e3b9d'
NOVA_QUERY_VGPU_2 = (
    'group_policy=none&limit=1000'
    '&requiredf77918ef-b38d-42d0-968c-70757f0e3b9d-0='
    'CUSTOM_MDEV_TYPE_NVIDIA_699%2COWNER_NOVA'
    '&requiredf77918ef-b38d-42d0-968c-70757f0e3b9d-1='
    'CUSTOM_MDEV_TYPE_NVIDIA_699%2COWNER_NOVA'
    '&resources=DISK_GB%3A1%2CMEMORY_MB%3A512%2CVCPU%3A1'
    '&resourcesf77918ef-b38d-42d0-968c-70757f0e3b9d-0='
    'CUSTOM_MDEV_NVIDIA_699%3A1'
    '&resourcesf77918ef-b38d-42d0-968c-70757f0e3b9d-1='
    'CUSTOM_MDEV_NVIDIA_699%3A1'
    '&root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED')


class TreesTest(testtools.TestCase):

    def test_shapes_and_models(self):
        # (shape, model) -> (providers, children's units, names of the
        # first child)
        cases = {
            ('a', 'per-parent'): (129, [1] * 128, 'cn01_0000:41:00.1'),
            ('a', 'per-GPU'): (9, [16] * 8, 'cn01_0000:41:00.0'),
            ('b', 'per-GPU'): (5, [16] * 4, 'cn01_0000:81:00.0'),
            ('b', 'per-parent'): (5, [16] * 4, 'cn01_0000:81:00.0'),
        }
        for (key, model), (count, units, first) in cases.items():
            shape = trees.SHAPES[key]
            providers = trees.host_tree(shape, model, 0)
            self.assertEqual(count, len(providers), (key, model))
            root, children = providers[0], providers[1:]
            self.assertIsNone(root['parent_provider_uuid'])
            self.assertEqual(first, children[0]['name'])
            rc = trees.resource_class(shape.mdev_type)
            self.assertEqual(units, [c['inventories'][rc]['total']
                                     for c in children])
            self.assertEqual(units, [c['inventories'][rc]['max_unit']
                                     for c in children])
            self.assertEqual(shape.per_host, sum(units))
            for child in children:
                self.assertEqual(root['uuid'], child['parent_provider_uuid'])
                self.assertIn(trees.type_trait(shape.mdev_type),
                              child['traits'])
                self.assertIn('OWNER_NOVA', child['traits'])
        # the last VF of the first GPU, the PF of the second
        a = trees.SHAPES['a']
        self.assertEqual('cn01_0000:41:02.0',
                         trees.host_tree(a, 'per-parent', 0)[16]['name'])
        self.assertEqual('cn01_0000:42:00.0',
                         trees.host_tree(a, 'per-GPU', 0)[2]['name'])

    def test_ten_hosts(self):
        c = trees.SHAPES['c']
        for model, count in (('per-parent', 1290), ('per-GPU', 90)):
            providers = trees.trees(c, model)
            self.assertEqual(count, len(providers))
            self.assertEqual(count, len({p['uuid'] for p in providers}))
            roots = [p for p in providers if not p['parent_provider_uuid']]
            self.assertEqual(['cn%02d' % i for i in range(1, 11)],
                             [r['name'] for r in roots])

    def test_names_of_patch_0004(self):
        self.assertEqual('CUSTOM_MDEV_NVIDIA_35',
                         trees.resource_class('nvidia-35'))
        self.assertEqual('CUSTOM_MDEV_TYPE_NVIDIA_35',
                         trees.type_trait('nvidia-35'))
        self.assertEqual('CUSTOM_MDEV_TYPE_I915_GVTG_V5_4',
                         trees.type_trait('i915-GVTg_V5_4'))

    def test_unknown_model_or_policy(self):
        self.assertRaises(ValueError, trees.host_tree, trees.SHAPES['a'],
                          'per-card', 0)
        self.assertRaises(ValueError, trees.query_params, trees.SHAPES['a'],
                          2, 'pack')
        self.assertRaises(ValueError, trees.query_params, trees.SHAPES['a'],
                          2, 'default', 'unnumbered')


class QueryTest(testtools.TestCase):

    def test_the_query_nova_builds(self):
        self.assertEqual(NOVA_QUERY_VGPU_2, trees.query_string(
            trees.SHAPES['a'], 2, 'default',
            request_id=NOVA_REQUEST_ID))

    def test_group_policy_sent(self):
        # (flavor policy, groups) -> what Nova sends
        cases = {('default', 1): None, ('default', 2): 'none',
                 ('default', 8): 'none', ('isolate', 1): 'isolate',
                 ('isolate', 8): 'isolate'}
        for (policy, groups), sent in cases.items():
            self.assertEqual(sent, trees.sent_policy(policy, groups))
            params = dict(trees.query_params(trees.SHAPES['b'], groups,
                                             policy))
            self.assertEqual(sent, params.get('group_policy'))

    def test_one_group_of_n(self):
        params = trees.query_params(trees.SHAPES['b'], 8, 'default',
                                    'one-group')
        groups = [(k, v) for k, v in params
                  if k.startswith('resources') and k != 'resources']
        self.assertEqual([('resources%s-0' % trees.REQUEST_ID,
                           'CUSTOM_MDEV_NVIDIA_222:8')], groups)
        self.assertNotIn('group_policy', dict(params))


class SectionsTest(testtools.TestCase):

    def test_replace_touches_only_the_section(self):
        text = '# Results\n\nsome table\n'
        once = sections.replace(text, 'placement', 'first')
        self.assertTrue(once.startswith(text.rstrip('\n')))
        self.assertIn('first', sections.extract(once, 'placement'))
        twice = sections.replace(once + 'after\n', 'placement', 'second')
        self.assertNotIn('first', twice)
        self.assertTrue(twice.startswith(text.rstrip('\n')))
        self.assertTrue(twice.endswith('after\n'))

    def test_a_rewritten_file_keeps_the_section(self):
        old = sections.replace('# old run\n', 'placement', 'the table')
        new = sections.keep('# new run\n', old)
        self.assertTrue(new.startswith('# new run\n'))
        self.assertEqual(sections.extract(old, 'placement'),
                         sections.extract(new, 'placement'))
        self.assertEqual('# new run\n', sections.keep('# new run\n', ''))

    def test_broken_markers(self):
        begin, end = sections.markers('placement')
        for text in (begin + '\nx\n', end + '\nx\n', end + '\n' + begin):
            error = self.assertRaises(ValueError, sections.extract, text,
                                      'placement')
            self.assertIn('section placement', str(error))
        self.assertRaises(ValueError, sections.markers, 'Bad Name')


def _case(table, shape, model, n, status='ok', wall=0.1, cpu=0.05):
    run = {'status': status, 'wall': wall, 'cpu': cpu, 'rss_kib': 1000}
    if status == 'ok':
        run.update(candidates=1, hosts=1)
    return {'table': table, 'shape': shape, 'model': model, 'n': n,
            'policy': 'default', 'settings': 'wide', 'runs': [run]}


class VerdictTest(testtools.TestCase):

    def verdict(self, cases):
        return {(row[0], row[1]): (row[6], row[7])
                for row in report.verdicts({'cases': cases})}

    def test_bounds(self):
        fast = [_case('main', 'a', 'per-GPU', 8),
                _case('main', 'b', 'per-GPU', 8),
                _case('main', 'c', 'per-GPU', 8, wall=4.0, cpu=1.0)]
        self.assertEqual({('main', 'per-GPU'): (True, True),
                          ('main', 'per-parent'): (False, False)},
                         self.verdict(fast))
        # over 1 s of wall on one host, CPU under it
        slow = fast[:1] + [_case('main', 'b', 'per-GPU', 8, wall=1.2)] + \
            fast[2:]
        self.assertEqual((False, True),
                         self.verdict(slow)[('main', 'per-GPU')])
        timeout = fast[:2] + [_case('main', 'c', 'per-GPU', 4,
                                    status='timeout', wall=60, cpu=20)]
        self.assertEqual((False, False),
                         self.verdict(timeout)[('main', 'per-GPU')])
        # N > 8 does not count
        self.assertEqual((True, True), self.verdict(fast + [
            _case('main', 'a', 'per-GPU', 16, wall=9)])[('main', 'per-GPU')])


class PlanTest(testtools.TestCase):

    def test_tables(self):
        from benchmarks import placement
        cases = placement.plan(('a', 'b', 'c'), (1, 2, 4, 8),
                               trees.POLICIES, placement.TABLES)
        by_table = {}
        for case in cases:
            by_table.setdefault(case.table, []).append(case)
        # 5 (shape, model) trees x 4 N x 2 policies x 2 settings
        self.assertEqual(80, len(by_table['main']))
        self.assertEqual(80, len(by_table['hash']))
        # N >= 2, the flavor's policy unset, both settings
        self.assertEqual(5 * 3 * 2, len(by_table['one-group']))
        # only what patch 0002 changes: isolate with the wide settings
        self.assertEqual(5 * 4, len(by_table['isolate']))
        self.assertEqual({('isolate', 'wide')}, {
            (c.policy, c.settings) for c in by_table['isolate']})
        self.assertEqual({0: 0, 1: 1, 2: 2}, {
            c.patches: c.patches for c in cases})
        self.assertEqual(len(cases), len({c.key() for c in cases}))

    def test_a_skipped_query_fails_its_row(self):
        runs = [{'status': 'skipped', 'after': 4}]
        self.assertEqual('not run: N=4 timed out', report.brief(runs))
        cases = [_case('main', shape, 'per-GPU', 8) for shape in 'abc']
        cases[2]['runs'] = runs
        self.assertEqual(
            (False, False),
            {(row[0], row[1]): (row[6], row[7]) for row in report.verdicts(
                {'cases': cases})}[('main', 'per-GPU')])

    def test_a_query_not_sent_fails_its_row_and_says_why(self):
        work = {'products': 65536, 'partials': 0, 'comparisons': 32576334,
                'kept': 65536, 'candidates': 1000}
        runs = [{'status': 'not sent', 'work': work, 'estimate': 235.6}]
        self.assertEqual('not sent: 65,536 products, ≥ 32,576,334 '
                         'comparisons (est. 236 s)', report.brief(runs))
        cases = [_case('main', shape, 'per-GPU', 8) for shape in 'abc']
        cases[1]['runs'] = runs
        rows = {(row[0], row[1]): row for row in report.verdicts(
            {'cases': cases})}
        self.assertEqual((False, False), rows[('main', 'per-GPU')][6:8])
        self.assertEqual(['not sent', 'not sent'],
                         rows[('main', 'per-GPU')][4])
        # the main table gives the work, and what the query did when it
        # was sent on 2026-12-02
        cases[1].update(policy='default', settings='defaults')
        table = '\n'.join(report.main_table({'cases': cases}))
        self.assertIn('| b | 1 | per-GPU (= per-parent) | 8 | unset → none '
                      '| defaults | 65,536 | **not sent**: 65,536 products, '
                      '≥ 32,576,334 comparisons (est. 236 s); 2026-12-02: '
                      'timeout, 35.0 s CPU | - | - | - | 0 |', table)


class WorkTest(testtools.TestCase):
    """What benchmarks/placement_work.py counts, on cases whose counts
    follow from the tree by hand (the functional test
    test_placement_work compares the counts with a profiled Placement)."""

    def work(self, shape, model, n, policy='default', settings='defaults',
             patches=0, translation='groups'):
        from benchmarks import placement
        from benchmarks import placement_work as work
        return work.for_case(trees.SHAPES[shape], model, n, policy,
                             translation, placement.SETTINGS[settings],
                             patches)

    def test_defaults_walk_every_product(self):
        # 128 one-unit providers, vGPU:2: 128**2 products, of which the
        # 128 that take one provider twice exceed its capacity; each pair
        # of providers is kept twice (two orders), one comparison each
        w = self.work('a', 'per-parent', 2)
        self.assertEqual((128 ** 2, 0, 128 * 127 // 2, 128 * 127, 1000),
                         (w.products, w.partials, w.comparisons, w.kept,
                          w.candidates))
        # 8 GPUs of 16, vGPU:8: 8**8 products, all kept
        w = self.work('a', 'per-GPU', 8)
        self.assertEqual((8 ** 8, 8 ** 8), (w.products, w.kept))
        # isolate: 8! kept, all on the same 8 providers: one hash
        w = self.work('a', 'per-GPU', 8, 'isolate')
        f = 40320
        self.assertEqual((8 ** 8, f, f * (f - 1) // 2),
                         (w.products, w.kept, w.comparisons))
        # ten hosts: ten times the work, never a comparison across hosts
        w10 = self.work('c', 'per-GPU', 8, 'isolate')
        self.assertEqual((10 * 8 ** 8, 10 * f, 10 * (f * (f - 1) // 2)),
                         (w10.products, w10.kept, w10.comparisons))
        # the hash of patch 0001: no comparison
        self.assertEqual(0, self.work('a', 'per-GPU', 8, 'isolate',
                                      patches=1).comparisons)

    def test_wide_settings_stop_at_the_limit(self):
        w = self.work('a', 'per-GPU', 8, settings='wide')
        self.assertEqual((1000, 1000), (w.products, w.kept))
        # every product checked at each of its 8 levels and the root
        # group's: more partial products than products
        self.assertGreater(w.partials, w.products)
        # ten hosts, breadth-first: 100 from each
        w = self.work('c', 'per-GPU', 8, settings='wide')
        self.assertEqual(1000, w.products)

    def test_isolate_without_0002_walks_the_rejected_products(self):
        # the 1,000th permutation of the 8 GPUs is product 671,098 in the
        # product's order; 0002 prunes the products that repeat a GPU
        w = self.work('a', 'per-GPU', 8, 'isolate', 'wide')
        self.assertEqual((671098, 1000), (w.products, w.kept))
        w = self.work('a', 'per-GPU', 8, 'isolate', 'wide', patches=2)
        self.assertEqual((1000, 1000, 0), (w.products, w.kept,
                                           w.comparisons))
        # 4 GPUs cannot isolate 8 groups: every product checked, none kept
        w = self.work('b', 'per-GPU', 8, 'isolate', 'wide')
        self.assertEqual((4 ** 8, 0, 0), (w.products, w.kept, w.candidates))

    def test_one_group_of_n(self):
        # per VF parent no provider holds 2 units: no walk at all
        w = self.work('a', 'per-parent', 2, translation='one-group')
        self.assertEqual((0, 0), (w.products, w.candidates))
        w = self.work('a', 'per-GPU', 8, translation='one-group')
        self.assertEqual((8, 8), (w.products, w.candidates))

    def test_estimate_and_what_is_not_sent(self):
        from benchmarks import placement_work as work
        w = work.Work(products=1000, partials=2000, comparisons=0, kept=1000,
                      candidates=1000)
        self.assertAlmostEqual(
            work.COSTS['base'] + 1000 * work.COSTS['products'] +
            2000 * work.COSTS['partials'], work.estimate(w))
        # what timed out on 2026-12-02 is estimated above half the bound,
        # what answered (in 7.5 s of wall at most) below it
        self.assertGreater(work.estimate(self.work('b', 'per-GPU', 8)), 30)
        self.assertGreater(work.estimate(self.work('c', 'per-GPU', 8,
                                                   'isolate', 'wide')), 30)
        self.assertLess(work.estimate(self.work('c', 'per-parent', 2)), 30)

    def test_providers_that_differ_are_refused(self):
        from benchmarks import placement_work as work
        shape = trees.SHAPES['b']
        rc = trees.resource_class(shape.mdev_type)
        providers = trees.host_tree(shape, 'per-GPU', 0)
        providers[1]['inventories'][rc] = dict(
            providers[1]['inventories'][rc], total=8, max_unit=8)
        error = self.assertRaises(ValueError, work.host_model, providers, rc,
                                  1)
        self.assertIn('cn01_0000:81:00.0: (8,', str(error))
