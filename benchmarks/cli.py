"""The operator's view: the real ``nova-pci-mdev`` process, measured.

Every sample is one run of the console script of this virtualenv (the
same file an operator runs), forked by a small interpreter
(:data:`TRAMPOLINE`) and reaped there with ``wait4``, whose resource usage
gives the child's own CPU time (user + system) and peak RSS
(``ru_maxrss``); the trampoline's clock around it gives its wall time. Not
from this runner: Linux carries a process's memory high-water mark from
before ``exec`` into its ``ru_maxrss``, and a child this runner spawns
(``posix_spawn`` shares its memory until ``exec``, ``fork`` copies it)
would report at least the runner's own peak: 59 MB for ``--help``, which
``/usr/bin/time`` measures at 17 MB. The trampoline's own peak (about
6 MB, :func:`floor`) is the least a row can show. stdout goes to a file
(what a redirect costs), is checked after the run, untimed, and thrown
away.

Hosts: the bundled sample host (no ``--connection``) and generated hosts
of N node devices (:func:`benchmarks.hostgen.host_xml` as a ``test:///``
file with :data:`benchmarks.hostgen.NOVA_CONF`), each with a state
directory of its own. ``first run`` is ``devices`` on an empty state
directory (every device is new to the store); every other row is a run on
a state directory that a previous run filled, as an operator's is.

Start-up: ``python -c 'import oslo_versionedobjects.base'`` (what any
command that builds versioned objects must pay: it imports oslo.messaging
and eventlet), ``nova-pci-mdev --help`` and ``devices`` on the sample
host, interleaved.
"""

import dataclasses
import json
import os
import shutil
import sys

from benchmarks import hostgen

INSTANCE = '6e9f3c1a-0b2d-4e5f-8a7b-9c0d1e2f3a4b'
CLAIM = ('claim', '--extra-spec', 'pci_passthrough:alias=%s:1'
         % hostgen.ALIAS_NAME, '--instance', INSTANCE)
RELEASE = ('release', '--instance', INSTANCE)
OVO_IMPORT = 'import oslo_versionedobjects.base'
#: Run by ``python -I -S -c``: fork ``argv[2:]``, wait for it, write its
#: exit code, CPU, peak RSS and wall time as JSON to ``argv[1]``.
TRAMPOLINE = (
    'import json, os, sys, time\n'
    'start = time.perf_counter()\n'
    'pid = os.fork()\n'
    'if pid == 0:\n'
    '    os.execv(sys.argv[2], sys.argv[2:])\n'
    '_, status, ru = os.wait4(pid, 0)\n'
    'wall = time.perf_counter() - start\n'
    'with open(sys.argv[1], "w") as f:\n'
    '    json.dump({"code": os.waitstatus_to_exitcode(status),\n'
    '               "cpu": ru.ru_utime + ru.ru_stime,\n'
    '               "rss_kib": ru.ru_maxrss, "wall": wall}, f)\n')


def _first_line_has(text):
    return lambda out: out.startswith(text)


def _json_list(out):
    return isinstance(json.loads(out), list)


#: (label, argv after the global options, check of stdout)
COMMANDS = (
    ('check-config', ('check-config',), lambda out: bool(out)),
    ('devices', ('devices',), _first_line_has('host ')),
    ('devices --format json', ('--format', 'json', 'devices'), _json_list),
    ('pools', ('pools',), _first_line_has('numa_node')),
    ('inventory', ('inventory',), _first_line_has('compute node')),
    ('claim', CLAIM, lambda out: ' claimed 1 device(s)' in out),
    ('release', RELEASE, lambda out: ' released 1 device(s)' in out),
)


@dataclasses.dataclass
class Sample:
    cpu: float          # seconds, user + system of the child
    wall: float         # seconds
    rss_kib: int        # ru_maxrss of the child
    load: float         # 1-minute load average when it started

    def to_dict(self):
        return dataclasses.asdict(self)


def cli_argv():
    """The console script next to this interpreter (the virtualenv's)."""
    script = os.path.join(os.path.dirname(sys.executable), 'nova-pci-mdev')
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, '-m', 'nova_pci_mdev.cmd.cli']


def child_env():
    """This environment without ``PYTHONDONTWRITEBYTECODE`` (tox sets it):
    the CLI runs as installed code does, from bytecode caches (pip compiles
    at install; an editable checkout writes them on the first run) instead
    of compiling every module on every run."""
    env = dict(os.environ)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    return env


def measure(argv, out_path, check=None):
    """Run ``argv`` once; a :class:`Sample`. Fails loudly on a non-zero
    exit or when ``check(stdout)`` is false."""
    err_path = out_path + '.stderr'
    usage_path = out_path + '.usage'
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, out_path, flags, 0o600),
               (os.POSIX_SPAWN_OPEN, 2, err_path, flags, 0o600)]
    load = os.getloadavg()[0]
    trampoline = [sys.executable, '-I', '-S', '-c', TRAMPOLINE, usage_path]
    pid = os.posix_spawn(sys.executable, trampoline + list(argv),
                         child_env(), file_actions=actions)
    _, status, _usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit('benchmark: the trampoline of %s exited %d'
                         % (' '.join(argv), os.waitstatus_to_exitcode(status)))
    with open(usage_path) as f:
        usage = json.load(f)
    code = usage['code']
    with open(out_path) as f:
        out = f.read()
    with open(err_path) as f:
        err = f.read()
    if code != 0 or (check is not None and not check(out)):
        raise SystemExit('benchmark: %s exited %d\nstdout: %s\nstderr: %s'
                         % (' '.join(argv), code, out[:2000], err[:2000]))
    return Sample(cpu=usage['cpu'], wall=usage['wall'],
                  rss_kib=usage['rss_kib'], load=load)


def floor(workdir):
    """The peak RSS (KiB) a row shows for a command that uses no memory
    (``/bin/true`` through the trampoline): the least any row can show."""
    return measure(['/bin/true'], os.path.join(workdir, 'floor.txt')).rss_kib


class CliHost:
    """One host the CLI runs on, with its state directory."""

    def __init__(self, workdir, label, connection_args):
        self.workdir = workdir
        self.label = label
        self.connection_args = list(connection_args)
        self.state_dir = os.path.join(workdir, 'state-%s' % label)
        self.out = os.path.join(workdir, 'out-%s.txt' % label)

    def argv(self, state_dir, command):
        return (cli_argv() + self.connection_args +
                ['--state-dir', state_dir] + list(command))

    def run(self, command, check=None, state_dir=None):
        return measure(self.argv(state_dir or self.state_dir, command),
                       self.out, check)

    def first_run(self, index):
        """``devices`` on an empty state directory."""
        fresh = os.path.join(self.workdir, 'fresh-%s-%d' % (self.label,
                                                            index))
        try:
            return self.run(('devices',), COMMANDS[1][2], state_dir=fresh)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)


#: Node devices of the start-up base host: one group of the generator
#: (a GPU, a NIC with its VFs, two drives).
BASE_NODES = 16
#: Runs a round of every command on the base and the generated hosts.
REPEATS = 1
#: Runs a round on the base and the smallest host of the growth span: the
#: CPU above start-up there is a few tens of ms (the noise of one process),
#: so the median of more runs stands for the round.
SMALL_REPEATS = 3


def generated_host(workdir, n, label=None):
    path = os.path.join(workdir, 'cli-host-%d.xml' % n)
    with open(path, 'w') as f:
        f.write(hostgen.host_xml(hostgen.generate(n, unit='nodes')))
    conf = os.path.join(workdir, 'cli-nova.conf')
    with open(conf, 'w') as f:
        f.write(hostgen.NOVA_CONF)
    return CliHost(workdir, label or str(n),
                   ['--connection', 'test://' + path, '--config-file', conf])


def base_host(workdir):
    """The start-up base of the growth exponents: a generated host of
    :data:`BASE_NODES` node devices, the same process kind as the big
    ones (same configuration, a ``test:///`` host file, a state directory
    of its own), so that what a command costs at N devices less what it
    costs here is the part that grows with N."""
    return generated_host(workdir, BASE_NODES, label='base')


def sample_host(workdir):
    return CliHost(workdir, 'sample', [])


def run_hosts(hosts, runs, log, repeats=None):
    """``{host key: {'first run': [...], command label: [...]}}`` of Sample
    dicts, each with the ``round`` it ran in. The hosts are interleaved
    round by round (each round runs every command on every host), so that
    all sizes see the same machine load and the growth exponents above
    start-up (differences of CPU times) do not follow its drift.
    ``repeats`` (host key -> n) runs the commands of a host n times a
    round (the growth exponents come from medians of few samples)."""
    repeats = repeats or {}
    results = {key: {'first run': []} for key in hosts}
    for host in hosts.values():
        host.run(('devices',), COMMANDS[1][2])      # fills the state dir
    for index in range(runs):
        for key, host in hosts.items():
            results[key]['first run'].append(dict(
                host.first_run(index).to_dict(), round=index))
            for _ in range(repeats.get(key, 1)):
                for label, command, check in COMMANDS:
                    results[key].setdefault(label, []).append(dict(
                        host.run(command, check).to_dict(), round=index))
        log('cli: round %d of %d done (%s)' % (
            index + 1, runs, ', '.join(str(h.label) for h in hosts.values())))
    return results


def run_startup(workdir, runs):
    """Interleaved samples of the oslo.versionedobjects import, --help and
    ``devices`` on the sample host (warm state directory)."""
    host = sample_host(workdir)
    host.run(('devices',), COMMANDS[1][2])
    out = os.path.join(workdir, 'out-startup.txt')
    results = {'ovo_import': [], 'help': [], 'devices': []}
    for _ in range(runs):
        results['ovo_import'].append(measure(
            [sys.executable, '-c', OVO_IMPORT], out).to_dict())
        results['help'].append(measure(
            cli_argv() + ['--help'], out,
            lambda text: 'usage: nova-pci-mdev' in text).to_dict())
        results['devices'].append(host.run(('devices',),
                                           COMMANDS[1][2]).to_dict())
    return results
