"""GET /allocation_candidates for vGPU:N on the real Placement, timed.

    python -m benchmarks.placement                # full run, writes the
                                                  # Placement section of
                                                  # benchmarks/RESULTS.md
    python -m benchmarks.placement --quick        # a smoke subset, < 20 s
    python -m benchmarks.placement --tables main --shapes a,b --output -

What it answers: with the provider trees the Nova series reports
(:mod:`benchmarks.placement_trees`: shapes a = 8 SR-IOV A100-like GPUs x 16
VF parents, b = 4 T4-like GPUs x 16 mdevs, c = 10 hosts of a; models
per-parent = one provider per mdev parent, per-GPU = one per physical GPU)
how long the unmodified openstack-placement installed in this virtualenv
takes to answer the query Nova 34.0.0 sends for a flavor of 1 VCPU, 512 MB,
1 GB and ``pci_passthrough:alias=vGPU:N`` with ``[filter_scheduler]
pci_in_placement`` on (N one-unit request groups), with the flavor's
``group_policy`` unset (Nova then sends ``none`` for N >= 2) or
``isolate``, with Placement's default options and with the options
Placement documents for wide provider trees (:data:`SETTINGS`).

Tables (``--tables``):

* ``main``: the above;
* ``one-group``: the same trees asked for one group of N units (every
  vGPU from one provider), as an alternative translation;
* ``hash``: the ``main`` queries on a copy of the installed ``placement``
  package with ``patches/placement/0001-*.patch`` applied (the copy goes
  first on the server's ``PYTHONPATH``; the measured process runs the
  patched files, nothing is monkeypatched);
* ``isolate``: the ``main`` queries with ``group_policy=isolate`` and the
  wide-tree settings (the only ones patch 0002 changes: its code runs only
  with ``optimize_for_wide_provider_trees`` and ``isolate``) on a copy
  with ``0001`` and ``0002`` applied.

Before a query is sent, :mod:`benchmarks.placement_work` computes the
work Placement 16 must do for it (complete products of the request
groups' candidates it checks, partial products the wide-tree generator
checks, comparisons in its candidate set) from the tree, the query and the
settings, and :func:`benchmarks.placement_work.estimate` the wall time
that takes at per-unit costs of about three times the highest measured; a
query whose estimate exceeds half its bound is not sent, and the table
gives its counts instead of a time. In a series of queries that differ
only in N, a query is not run once a smaller N timed out (the candidates
only grow with N); the table says so.

Every query runs in a child process of a Placement server
(:mod:`benchmarks.placement_server`) under a wall-clock bound
(``--timeout``; killed and reported as a timeout when it overruns) and an
address-space cap (``--memory-mb``); CPU and peak RSS are that child's
own. The query strings are checked against the ones Nova 34.0.0 builds
(:mod:`benchmarks.placement_nova`, run in ``benchmarks/.nova-venv`` when
it exists or ``--nova-python``).
"""

import argparse
import collections
import dataclasses
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import placement_report
from benchmarks import placement_trees as trees
from benchmarks import placement_work
from benchmarks import sections
from benchmarks import worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'benchmarks', 'RESULTS.md')
PATCHES = os.path.join(ROOT, 'patches', 'placement')
NOVA_PYTHON = os.path.join(ROOT, 'benchmarks', '.nova-venv', 'bin',
                           'python')

#: [placement]max_allocation_candidates of the wide-tree settings: the
#: ``limit`` Nova sends ([scheduler]max_placement_results, 1000). Placement
#: applies ``limit`` after generating every candidate, so generating more
#: than Nova takes is wasted; with breadth-first generation the 1,000 are
#: spread over the hosts (up to 1,000 hosts keep one candidate each, as
#: ``limit`` alone would give). Placement's own help asks for "not more
#: than 1000" with optimize_for_wide_provider_trees.
MAX_CANDIDATES = 1000
SETTINGS = collections.OrderedDict((
    ('defaults', {}),
    ('wide', {'max_allocation_candidates': MAX_CANDIDATES,
              'allocation_candidates_generation_strategy': 'breadth-first',
              'optimize_for_wide_provider_trees': True}),
))
COUNTS = (1, 2, 4, 8)
TABLES = ('main', 'one-group', 'hash', 'isolate')
#: table -> how many patches of patches/placement/ its Placement has.
PATCHED = {'main': 0, 'one-group': 0, 'hash': 1, 'isolate': 2}
QUICK = {'shapes': ('b', 'a'), 'models': ('per-GPU',), 'counts': (1, 2),
         'policies': ('default',), 'tables': ('main',), 'timeout': 10}
TIMEOUT = 60
MEMORY_MB = 4096
#: More samples of a query that answers fast (wall noise on a shared
#: machine); one sample of a slow one.
SAMPLES = ((1.0, 5), (10.0, 3))


def log(message):
    print(message, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Case:
    table: str           # one of TABLES
    shape: str
    model: str
    n: int
    policy: str          # the flavor's group_policy: default or isolate
    settings: str        # a key of SETTINGS

    @property
    def patches(self):
        """How many patches of patches/placement/ the server runs with."""
        return PATCHED[self.table]

    def series(self):
        """The cases that differ from this one only in N."""
        return (self.table, self.shape, self.model, self.policy,
                self.settings)

    @property
    def translation(self):
        return 'one-group' if self.table == 'one-group' else 'groups'

    def key(self):
        return '|'.join(str(v) for v in dataclasses.astuple(self))

    def work(self):
        """The :class:`benchmarks.placement_work.Work` of its query."""
        return placement_work.for_case(
            trees.SHAPES[self.shape], self.model, self.n, self.policy,
            self.translation, SETTINGS[self.settings], self.patches)


def plan(shapes, counts, policies, tables, models=None):
    """Every case to measure, grouped by server (variant, shape, model)."""
    cases = []
    for table in tables:
        for key in shapes:
            shape = trees.SHAPES[key]
            for model in shape.models():
                if models and model not in models:
                    continue
                for settings in SETTINGS:
                    for n in counts:
                        if table == 'one-group' and n == 1:
                            continue    # the same query as main's N=1
                        for policy in policies:
                            if table == 'one-group' and policy != 'default':
                                continue    # one group: nothing to isolate
                            if table == 'isolate' and (
                                    policy, settings) != ('isolate', 'wide'):
                                continue    # 0002 changes nothing else
                            cases.append(Case(table, key, model, n, policy,
                                              settings))
    return cases


class Server(worker.Worker):
    """A :mod:`benchmarks.placement_server` process on one database."""

    def __init__(self, db_path, pythonpath=None):
        env = dict(os.environ)
        if pythonpath:
            env['PYTHONPATH'] = os.pathsep.join(
                [pythonpath] + [p for p in [env.get('PYTHONPATH')] if p])
        super().__init__([sys.executable, '-m', 'benchmarks.placement_server',
                          '--db', db_path], 'placement server', env=env)


def placement_patches(count):
    """The first ``count`` patches of patches/placement/, in order."""
    found = sorted(glob.glob(os.path.join(PATCHES, '[0-9][0-9][0-9][0-9]-'
                                                   '*.patch')))
    if len(found) < count:
        raise SystemExit('%d patches needed in %s, found %d' % (
            count, PATCHES, len(found)))
    return found[:count]


def patched_copy(workdir, patches):
    """A copy of the installed ``placement`` package with ``patches``
    applied in order (``git apply``); the directory to put first on
    ``PYTHONPATH``."""
    import placement
    target = os.path.join(workdir, 'placement-%d' % len(patches))
    shutil.copytree(os.path.dirname(placement.__file__),
                    os.path.join(target, 'placement'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    for patch in patches:
        done = subprocess.run(['git', 'apply', '--whitespace=nowarn', patch],
                              cwd=target, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit('cannot apply %s to a copy of %s: %s' % (
                patch, os.path.dirname(placement.__file__), done.stderr))
    return target


def samples_for(first):
    if first['status'] != 'ok':
        return 1
    for seconds, count in SAMPLES:
        if first['wall'] < seconds:
            return count
    return 1


def measure(server, case, timeout, memory_mb):
    shape = trees.SHAPES[case.shape]
    query = trees.query_string(shape, case.n, case.policy, case.translation)
    runs = [server.ask('query', query=query,
                       settings=SETTINGS[case.settings], timeout=timeout,
                       memory_mb=memory_mb)]
    while len(runs) < samples_for(runs[0]):
        runs.append(server.ask('query', query=query,
                               settings=SETTINGS[case.settings],
                               timeout=timeout, memory_mb=memory_mb))
    return runs


def run_cases(cases, workdir, timeout, memory_mb):
    """``{case key: [query replies]}``, ``{server label: about}``. The
    trees of a (shape, model) are built once, by the first server that
    needs them, into a database file the later servers open."""
    by_server = collections.OrderedDict()
    for case in cases:
        by_server.setdefault((case.patches, case.shape, case.model),
                             []).append(case)
    replies, about, copies, timed_out = {}, {}, {0: None}, {}
    for (patches, shape, model), group in by_server.items():
        db = os.path.join(workdir, '%s-%s.db' % (shape, model))
        fresh = not os.path.exists(db)
        if patches not in copies:
            copies[patches] = patched_copy(workdir,
                                           placement_patches(patches))
        server = Server(db, copies[patches])
        label = '%d-patches %s %s' % (patches, shape, model)
        about[label] = server.ask('about')
        if fresh:
            built = server.ask('build', shape=shape, model=model)
            about[label]['build'] = built
            log('placement: built shape %s %s: %d providers in %.1f s'
                % (shape, model, built['providers'], built['seconds']))
        start = time.perf_counter()
        for case in group:
            smaller = timed_out.get(case.series())
            work = case.work()
            seconds = placement_work.estimate(work)
            if smaller is not None and smaller < case.n:
                replies[case.key()] = [{'status': 'skipped',
                                        'after': smaller}]
            elif seconds > timeout / 2:
                replies[case.key()] = [{'status': 'not sent'}]
            else:
                replies[case.key()] = measure(server, case, timeout,
                                              memory_mb)
                if replies[case.key()][0]['status'] == 'timeout':
                    timed_out.setdefault(case.series(), case.n)
            for reply in replies[case.key()]:
                reply.update(work=work.as_dict(), estimate=seconds)
            log('placement: %s N=%d %s %s %s: %s' % (
                label, case.n, case.policy, case.settings, case.table,
                placement_report.brief(replies[case.key()])))
        server.close()
        log('placement: %s done in %.0f s' % (label,
                                              time.perf_counter() - start))
    return replies, about


def check_queries(nova_python, counts):
    """Our query strings against Nova 34.0.0's, per shape type, N and
    policy: ``{'checked': [...], 'differ': [...]}`` or None (no Nova)."""
    if not nova_python or not os.path.exists(nova_python):
        return None
    checked, differ = [], []
    for mdev_type in sorted({s.mdev_type for s in trees.SHAPES.values()}):
        shape = next(s for s in trees.SHAPES.values()
                     if s.mdev_type == mdev_type)
        done = subprocess.run(
            [nova_python, '-m', 'benchmarks.placement_nova', mdev_type,
             ','.join(str(n) for n in counts)],
            cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit('benchmarks.placement_nova failed: %s'
                             % done.stderr[-2000:])
        for line in done.stdout.splitlines():
            nova = json.loads(line)
            ours = trees.query_string(shape, nova['n'], nova['policy'],
                                      request_id=nova['request_id'])
            what = '%s vGPU:%d %s' % (mdev_type, nova['n'], nova['policy'])
            (checked if ours == nova['query'] else differ).append(what)
            if ours != nova['query']:
                log('placement: query differs from Nova for %s:\n nova %s\n '
                    'ours %s' % (what, nova['query'], ours))
    return {'checked': checked, 'differ': differ}


def commit():
    def git(*args):
        return subprocess.run(['git'] + list(args), cwd=ROOT,
                              capture_output=True, text=True).stdout.strip()
    head = git('rev-parse', '--short=10', 'HEAD')
    dirty = git('status', '--porcelain', '--untracked-files=no')
    return head + (' (with uncommitted changes)' if dirty else '')


def machine():
    import platform
    cpu = platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next((line.split(':', 1)[1].strip() for line in f
                        if line.startswith('model name')), cpu)
    except OSError:
        pass
    from importlib import metadata
    return {'date': datetime.datetime.now(datetime.timezone.utc).strftime(
                '%Y-%m-%d %H:%M UTC'),
            'cpu': cpu, 'cores': os.cpu_count(),
            'python': platform.python_version(),
            'placement': metadata.version('openstack-placement'),
            'commit': commit(),
            'load': '%.2f %.2f %.2f' % os.getloadavg()}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true',
                        help='shapes b and a, per-GPU, N = 1, 2, policy '
                        'default, stock Placement (a smoke test)')
    parser.add_argument('--shapes', default=None,
                        help='comma-separated of %s' % ','.join(trees.SHAPES))
    parser.add_argument('--counts', default=None,
                        help='comma-separated N (default %s)'
                        % ','.join(map(str, COUNTS)))
    parser.add_argument('--tables', default=None,
                        help='comma-separated of %s (default: all)'
                        % ','.join(TABLES))
    parser.add_argument('--timeout', type=float, default=None,
                        help='wall-clock bound of one query, seconds '
                        '(default %d)' % TIMEOUT)
    parser.add_argument('--memory-mb', type=int, default=MEMORY_MB,
                        help='address-space cap of a query process')
    parser.add_argument('--nova-python', default=NOVA_PYTHON,
                        help='python of a Nova 34.0.0 virtualenv, to check '
                        'the query strings ("" to skip)')
    parser.add_argument('--output', default=None,
                        help='RESULTS.md to write the section to (default '
                        '%s for a full run, none for --quick); "-" for '
                        'stdout only' % os.path.relpath(RESULTS, ROOT))
    parser.add_argument('--json', default=None,
                        help='also write the raw results here')
    parser.add_argument('--from-json', default=None,
                        help='render a section from raw results, no run')
    args = parser.parse_args(argv)

    def listed(value, default, known, what, cast=str):
        items = tuple(cast(v) for v in value.split(',')) if value else default
        unknown = [v for v in items if v not in known]
        if unknown:
            parser.error('--%s: unknown %s (known: %s)' % (
                what, ', '.join(map(str, unknown)),
                ', '.join(map(str, known))))
        return items

    quick = QUICK if args.quick else {}
    args.shapes = listed(args.shapes, quick.get('shapes', tuple(
        trees.SHAPES)), trees.SHAPES, 'shapes')
    args.counts = listed(args.counts, quick.get('counts', COUNTS),
                         range(1, 17), 'counts', int)
    args.tables = listed(args.tables, quick.get('tables', TABLES), TABLES,
                         'tables')
    args.policies = quick.get('policies', trees.POLICIES)
    args.models = quick.get('models')
    if args.timeout is None:
        args.timeout = quick.get('timeout', TIMEOUT)
    if args.timeout <= 0:
        parser.error('--timeout must be positive, got %s' % args.timeout)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        results = run(args)
    text = placement_report.section(results)
    print(text)
    output = args.output
    if output == '-' or (output is None and args.quick):
        return 0
    output = output or RESULTS
    updated = sections.replace(sections.read(output), 'placement', text)
    with open(output, 'w') as f:
        f.write(updated)
    log('placement: wrote the placement section of %s' % output)
    return 0


def run(args):
    patches = placement_patches(max(PATCHED[t] for t in args.tables))
    results = {'machine': machine(), 'quick': args.quick,
               'timeout': args.timeout, 'memory_mb': args.memory_mb,
               'costs': placement_work.COSTS,
               'settings': SETTINGS, 'counts': list(args.counts),
               'patches': [os.path.relpath(p, ROOT) for p in patches]}
    results['nova_check'] = check_queries(args.nova_python, args.counts)
    cases = plan(args.shapes, args.counts, args.policies, args.tables,
                 args.models)
    log('placement: %d cases' % len(cases))
    start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix='placement-bench-',
                               dir='/dev/shm' if os.path.isdir('/dev/shm')
                               else None)
    try:
        replies, about = run_cases(cases, workdir, args.timeout,
                                   args.memory_mb)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results['cases'] = [dict(dataclasses.asdict(c), runs=replies[c.key()])
                        for c in cases]
    results['servers'] = about
    results['seconds'] = time.perf_counter() - start
    results['machine']['load_end'] = '%.2f %.2f %.2f' % os.getloadavg()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == '__main__':
    sys.exit(main())
