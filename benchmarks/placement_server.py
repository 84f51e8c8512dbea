"""The real OpenStack Placement, in this process, answering timed queries.

``python -m benchmarks.placement_server`` answers JSON requests, one per
line (:func:`benchmarks.timing.serve`):

* ``about``: which ``placement`` package this process imported (its path
  and ``AllocationRequest.__hash__`` source digest), its RSS;
* ``build`` ``{shape, model}``: creates the shape's provider trees
  (:mod:`benchmarks.placement_trees`; ``shape`` a key of its ``SHAPES``
  or the fields of a :class:`~benchmarks.placement_trees.Shape`) through
  Placement's REST API;
* ``query`` ``{query, settings, timeout, memory_mb, profile}``: one
  ``GET /allocation_candidates?<query>``, in a child process; with
  ``profile`` the child runs it under :mod:`cProfile` and also answers how
  often Placement called the functions :data:`COUNTED` names and how many
  pairs of its answer's allocation requests differ in their group
  mappings only (the work :mod:`benchmarks.placement_work` predicts; the
  timings of such a run are the profiler's, not Placement's).

Placement runs unmodified, as ``placement.deploy.loadapp`` builds it for
its own functional tests (``PlacementFixture`` without wsgi-intercept:
in-memory SQLite, ``noauth2``, token ``admin``); requests are handed to
the WSGI application with WebOb, in this thread (SQLite in memory is
served single-threaded). The ``placement`` package is whichever
``import placement`` finds: the runner puts a patched copy first on
``PYTHONPATH`` to measure a patch, nothing here changes Placement's code.

Each query runs in a child forked from this process after the trees are
built (so it sees the same database and pays nothing for start-up), with
Placement's options for that query set in the child only. The child times
the request (wall: ``perf_counter``; CPU: ``process_time``, the child is
single-threaded), counts the candidates and writes one JSON line to a
pipe. The parent waits for it at most ``timeout`` seconds of wall time,
kills it (SIGKILL) when it overruns, and reaps exactly that child with
``os.wait4(pid)``, whose resource usage is the child's own: peak RSS
(``ru_maxrss``, which starts at this process's RSS when it forks, since
the child maps the same pages) and, for a killed child, its CPU time.
``memory_mb`` caps the child's address space (``RLIMIT_AS``) so that a
runaway query fails with MemoryError instead of taking the machine.

Invariants: a query never changes the database the next one sees (it
runs in a child; the parent's copy is untouched), one child at a time,
and no child outlives its request.
"""

import collections
import gc
import hashlib
import inspect
import json
import os
import resource
import select
import signal
import sys
import time

from benchmarks import placement_trees as trees
from benchmarks import timing

TOKEN = 'admin'
#: Nova's report client sends GET /allocation_candidates at 1.36
#: (nova.scheduler.client.report.SAME_SUBTREE_VERSION).
QUERY_MICROVERSION = '1.36'
BUILD_MICROVERSION = '1.39'
#: Placement options a query may set, per group.
OPTIONS = {
    'max_allocation_candidates': 'placement',
    'allocation_candidates_generation_strategy': 'placement',
    'optimize_for_wide_provider_trees': 'workarounds',
}
#: Functions of ``placement.objects.allocation_candidate`` whose calls a
#: profiled query counts: one ``_satisfies_group_policy`` per complete
#: product ``_merge_candidates`` takes, one ``_exceeds_capacity`` per
#: partial product the wide-tree generator checks (``should_skip`` instead
#: where patch 0002 wraps it), one ``__eq__`` per comparison in the
#: candidate set.
COUNTED = ('_satisfies_group_policy', '_exceeds_capacity', 'should_skip',
           '__eq__')


class Placement:
    """The Placement WSGI application on the SQLite database ``db_path``
    (created with Placement's schema migrations if new: Placement starts
    as a deployment's does with ``[placement_database]sync_on_startup``).
    """

    def __init__(self, db_path):
        from oslo_config import cfg
        from oslo_config import fixture as config_fixture
        from placement import conf as placement_conf
        from placement import db_api
        from placement import deploy
        from placement.tests.functional.fixtures import placement as fx
        import webob

        self._webob = webob
        self.conf_fixture = config_fixture.Config(cfg.ConfigOpts())
        self.conf_fixture.setUp()
        placement_conf.register_opts(self.conf_fixture.conf)
        # A file, not sqlite:// in memory: oslo.db gives a forked child a
        # new connection (it refuses a pooled connection of another pid),
        # and a new in-memory connection is an empty database. The runner
        # keeps the files on tmpfs (no fsync cost while building).
        self.conf_fixture.config(connection='sqlite:///' + db_path,
                                 sync_on_startup=True,
                                 group='placement_database')
        # configuration, policy and noauth2 as in Placement's functional
        # tests; the database is ours.
        self.fixture = fx.PlacementFixture(
            token=TOKEN, conf_fixture=self.conf_fixture, db=False,
            use_intercept=False, register_opts=False)
        self.fixture.setUp()
        self.conf = self.conf_fixture.conf
        db_api.configure(self.conf)
        self.app = deploy.loadapp(self.conf)

    def request(self, method, path, body=None, microversion=None):
        """(status, JSON body or None) of one request to the app."""
        req = self._webob.Request.blank(path, method=method)
        req.headers['X-Auth-Token'] = TOKEN
        req.headers['OpenStack-API-Version'] = 'placement ' + (
            microversion or BUILD_MICROVERSION)
        req.headers['Accept'] = 'application/json'
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = 'application/json'
        resp = req.get_response(self.app)
        data = json.loads(resp.body) if resp.body else None
        return resp.status_int, data

    def write(self, method, path, body=None):
        status, data = self.request(method, path, body)
        if status >= 300:
            raise RuntimeError('%s %s: %d %s' % (method, path, status, data))
        return data

    def set_options(self, settings):
        for name, value in settings.items():
            if name not in OPTIONS:
                raise ValueError('unknown Placement option %r (known: %s)'
                                 % (name, ', '.join(sorted(OPTIONS))))
            self.conf.set_override(name, value, group=OPTIONS[name])


def build(placement, shape, model):
    """Create every provider of ``shape`` in ``model``; their count."""
    classes, traits = trees.custom_names(shape)
    for rc in classes:
        placement.write('PUT', '/resource_classes/' + rc)
    for trait in traits:
        placement.write('PUT', '/traits/' + trait)
    providers = trees.trees(shape, model)
    for prov in providers:
        body = {'name': prov['name'], 'uuid': prov['uuid']}
        if prov['parent_provider_uuid']:
            body['parent_provider_uuid'] = prov['parent_provider_uuid']
        created = placement.write('POST', '/resource_providers', body)
        generation = placement.write(
            'PUT', '/resource_providers/%s/inventories' % prov['uuid'],
            {'resource_provider_generation': created['generation'],
             'inventories': prov['inventories']}
        )['resource_provider_generation']
        placement.write(
            'PUT', '/resource_providers/%s/traits' % prov['uuid'],
            {'resource_provider_generation': generation,
             'traits': prov['traits']})
    return len(providers)


def _rss_kib():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return None


def _calls(profile):
    """``{name: calls}`` of the :data:`COUNTED` functions of Placement's
    allocation_candidate module in a :class:`cProfile.Profile`
    (``__eq__``: the one of ``AllocationRequest``, told from the other
    classes' by its first line)."""
    import pstats
    from placement.objects import allocation_candidate as ac
    eq_line = ac.AllocationRequest.__eq__.__code__.co_firstlineno
    counts = dict.fromkeys(COUNTED, 0)
    for (path, line, name), row in pstats.Stats(profile).stats.items():
        if not path.endswith(os.path.join('placement', 'objects',
                                          'allocation_candidate.py')):
            continue
        if name in counts and (name != '__eq__' or line == eq_line):
            counts[name] += row[1]
    return counts


def _mapping_only_pairs(body):
    """Pairs of allocation requests in an ``/allocation_candidates``
    answer that allocate the same amounts on the same providers and differ
    in their group mappings only. Placement 16's ``AllocationRequest``
    hashes its resources without the mappings, so these are the pairs that
    share a hash in its candidate set: each was compared at least once
    when the later one was added (the set has no deletions, so every entry
    of that hash lies on the new entry's probe sequence before a free
    slot)."""
    same = collections.Counter(
        json.dumps(ar['allocations'], sort_keys=True)
        for ar in body['allocation_requests'])
    return sum(k * (k - 1) // 2 for k in same.values())


def _child(placement, query, settings, memory_mb, out, profile=False):
    """Body of the forked child: run the query, write the result."""
    code = 0
    try:
        if memory_mb:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        placement.set_options(settings)
        # the child's own database connection, opened untimed
        placement.write('GET', '/resource_providers?name=warm-up')
        gc.collect()
        profiler = None
        if profile:
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        status, body = placement.request(
            'GET', '/allocation_candidates?' + query,
            microversion=QUERY_MICROVERSION)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        if profiler:
            profiler.disable()
        if status != 200:
            result = {'status': 'error', 'detail': '%d %s' % (
                status, json.dumps(body)[:500])}
        else:
            result = {'status': 'ok', 'wall': wall, 'cpu': cpu,
                      'candidates': len(body['allocation_requests']),
                      'providers': len(body['provider_summaries']),
                      'hosts': len({
                          body['provider_summaries'][rp]['root_provider_uuid']
                          for ar in body['allocation_requests']
                          for rp in ar['allocations']})}
            if profiler:
                result['calls'] = _calls(profiler)
                result['mapping_only_pairs'] = _mapping_only_pairs(body)
    except MemoryError:
        result = {'status': 'memory'}
        code = 3
    except BaseException as exc:    # reported to the runner, not lost
        result = {'status': 'error', 'detail': repr(exc)[:500]}
        code = 3
    try:
        os.write(out, (json.dumps(result) + '\n').encode())
    finally:
        os._exit(code)


def run_query(placement, query, settings, timeout, memory_mb=None,
              profile=False):
    """One query in a child; a dict with ``status`` (``ok``, ``timeout``,
    ``memory``, ``error``), ``wall``/``cpu`` (seconds), ``candidates``,
    ``rss_kib`` (the child's peak) and ``parent_rss_kib``."""
    gc.collect()
    parent_rss = _rss_kib()
    read, write = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(placement, query, settings, memory_mb, write, profile)
    os.close(write)
    chunks = []
    deadline = start + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                continue
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    text = b''.join(chunks).decode()
    if timed_out:
        result = {'status': 'timeout', 'wall': wall,
                  'cpu': usage.ru_utime + usage.ru_stime}
    elif text.strip():
        result = json.loads(text)
    else:
        result = {'status': 'error', 'detail': 'child exited %d with no '
                  'answer' % os.waitstatus_to_exitcode(status)}
    result['rss_kib'] = usage.ru_maxrss
    result['child_cpu'] = usage.ru_utime + usage.ru_stime
    result['parent_rss_kib'] = parent_rss
    return result


def serve(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != '--db':
        raise SystemExit('usage: python -m benchmarks.placement_server '
                         '--db PATH')
    timing.quiet_eventlet()
    return _serve(Placement(argv[1]))


def _serve(placement):

    def about(_request):
        import placement as package
        from placement.objects import allocation_candidate as ac
        source = inspect.getsource(ac.AllocationRequest.__hash__)
        return {'placement': os.path.dirname(package.__file__),
                'hash_digest': hashlib.sha256(
                    source.encode()).hexdigest()[:12],
                'hash_uses_mappings': 'mappings' in source,
                'rss_kib': _rss_kib(), 'python': sys.version.split()[0]}

    def do_build(request):
        shape = request['shape']
        shape = (trees.SHAPES[shape] if isinstance(shape, str)
                 else trees.Shape(**shape))
        start = time.perf_counter()
        count = build(placement, shape, request['model'])
        gc.collect()
        gc.freeze()
        return {'providers': count, 'seconds': time.perf_counter() - start,
                'rss_kib': _rss_kib()}

    def do_query(request):
        return run_query(placement, request['query'], request['settings'],
                         request['timeout'], request.get('memory_mb'),
                         request.get('profile', False))

    timing.serve({'about': about, 'build': do_build, 'query': do_query})
    return 0


if __name__ == '__main__':
    sys.exit(serve())
