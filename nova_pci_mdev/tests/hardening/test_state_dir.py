"""The state directory under attack (issue 15, items 2-6 and 8).

Every story runs the CLI (``cli.main`` in this process, or the console
script where a mount namespace is needed) or the CLI's own wiring of the
bundled sample host (:func:`.procs.cli_compute`) on a temporary state
directory, does to the directory what an operator, a full disk or a
clumsy script would, and checks what comes out: our error naming the
path, exit 2 (a bad option) or 3 (host/state), never a traceback; never a
fresh start beside lost state; never a device held twice; never a claim
reported that was not stored.

The last test is a property: random faults (truncate, delete, replace,
read-only, marker lost...) at random points of random claims and releases.
"""

import io
import json
import os
import random
import tempfile
import shutil
import sqlite3
import subprocess
import sys
import time

import fixtures
from hypothesis import given
from hypothesis import strategies as st

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.store import sqlite as store_mod
from nova_pci_mdev.tests.fixtures import fifos
from nova_pci_mdev.tests.fixtures import statedir
from nova_pci_mdev.tests.hardening import hosts
from nova_pci_mdev.tests.hardening import procs
from nova_pci_mdev.tests.hardening import recorder

SCRIPT = os.path.join(os.path.dirname(sys.executable), 'nova-pci-mdev')
INSTANCES = tuple('c0ffee00-0000-4000-8000-00000000000%d' % i
                  for i in range(1, 5))
VGPU = 'pci_passthrough:alias=vGPU:1'
#: An alias whose parent has no mdev yet: its claims create one.
CREATES = {'pci_passthrough:alias': 'nvidia-223:1'}


def run(*argv):
    """``nova-pci-mdev ARGV`` in this process: (exit code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def digest(path):
    with open(path, 'rb') as handle:
        return handle.read()


class StateDirTestCase(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'XDG_STATE_HOME', os.path.join(self.tmp, 'xdg')))
        self.state = os.path.join(self.tmp, 'state')
        self.db = os.path.join(self.state, 'state.db')

    def cli(self, *argv, state=None, expect=0):
        code, out, err = run('--state-dir', state or self.state, *argv)
        self.assertNotIn('Traceback', out + err)
        self.assertEqual(expect, code, 'nova-pci-mdev %s: %s%s'
                         % (' '.join(argv), out, err))
        return out, err

    def claim(self, instance, **kwargs):
        return self.cli('claim', '--extra-spec', VGPU, '--instance',
                        instance, **kwargs)

    def holder(self, **kwargs):
        out, _err = self.cli('--format', 'json', 'devices', **kwargs)
        held = {}
        for dev in json.loads(out):
            if dev['instance_uuid']:
                held.setdefault(dev['instance_uuid'], []).append(
                    dev['address'])
        return held

    def refused_everywhere(self, text, path):
        """Every command exits 3 naming ``path`` and saying ``text``."""
        commands = (('devices',), ('pools',), ('inventory',),
                    ('check-config',), ('release', '--instance',
                                        INSTANCES[0]),
                    ('claim', '--extra-spec', VGPU))
        for argv in commands:
            _out, err = self.cli(*argv, expect=3)
            self.assertIn(path, err)
            self.assertIn(text, err)
        return len(commands)


class LostStoreTest(StateDirTestCase):

    def test_truncated_store(self):
        with self.record('state', 'state.db truncated to 0 bytes while an '
                         'instance holds an mdev (item 2)', 'every command '
                         'exits 3 naming state.db; no fresh start, the mdev '
                         'is never handed out again') as row:
            self.claim(INSTANCES[0])
            held = self.holder()
            open(self.db, 'w').close()
            row.cases += self.refused_everywhere('is empty (0 bytes)',
                                                 self.db)
            self.assertEqual(0, os.path.getsize(self.db))
            self.assertEqual(1, len(held[INSTANCES[0]]))

    def _claim_with_fault(self, point, fault):
        compute = procs.cli_compute(self.state)
        self.addCleanup(procs.close, compute)

        def hook(where, **_details):
            if where == point:
                fault()
        compute = procs.hooked(compute, hook)
        return self.assertRaises(
            exception.StoreError, compute.claim, INSTANCES[1],
            flavor_mod.parse(CREATES, compute.settings.aliases))

    def test_store_deleted_during_a_claim(self):
        with self.record('state', 'state.db deleted during a claim (after '
                         'the mdev was created, before COMMIT) (item 3)',
                         'the claim fails (StoreError, nothing committed); '
                         'the next command exits 3 naming state.db') as row:
            for point in ('after-create', 'before-commit'):
                row.cases += 1
                shutil.rmtree(self.state, ignore_errors=True)
                self.claim(INSTANCES[0])
                exc = self._claim_with_fault(
                    point, lambda: os.unlink(self.db))
                self.assertIn('nothing was committed', str(exc))
                _out, err = self.claim(INSTANCES[2], expect=3)
                self.assertIn('%s: is missing' % self.db, err)

    def test_state_dir_deleted_during_a_claim(self):
        with self.record('state', 'the whole state directory deleted '
                         'during a claim (item 3)', 'the claim fails '
                         '(StoreError); the directory is not recreated by '
                         'it') as row:
            for point in ('before-create', 'after-create', 'before-commit'):
                row.cases += 1
                shutil.rmtree(self.state, ignore_errors=True)
                self.claim(INSTANCES[0])
                exc = self._claim_with_fault(
                    point, lambda: shutil.rmtree(self.state))
                self.assertIn(self.state, str(exc))
                self.assertFalse(os.path.exists(self.state), point)

    def test_replaced_store(self):
        with self.record('state', 'state.db replaced by another store, by '
                         'an older copy of itself, or by garbage',
                         'every command exits 3 naming state.db and saying '
                         'what happened; the file is left as it is') as row:
            self.claim(INSTANCES[0])
            older = digest(self.db)
            self.claim(INSTANCES[1])
            other = os.path.join(self.tmp, 'other')
            self.claim(INSTANCES[0], state=other)
            current = digest(self.db)
            for content, text in (
                    (digest(os.path.join(other, 'state.db')),
                     'replaced by another store'),
                    (older, 'an older copy replaced it'),
                    (b'garbage' * 100, 'not an SQLite database')):
                with open(self.db, 'wb') as handle:
                    handle.write(content)
                row.cases += self.refused_everywhere(text, self.db)
                self.assertEqual(content, digest(self.db))
            with open(self.db, 'wb') as handle:
                handle.write(current)
            self.assertEqual([INSTANCES[0], INSTANCES[1]],
                             sorted(self.holder()))


class ConsistencyTest(StateDirTestCase):
    """The store proves its own consistency on load (issue 31): its marker
    and database are cross-checked both ways, and its devices and
    instances tables agree, else every command exits 3 naming the
    disagreement and nothing is written."""

    def test_marker_deleted(self):
        with self.record('state', 'state.db.id (the marker) deleted beside '
                         'the current state.db, or beside an older copy '
                         'put back (issue 31)', 'every command exits 3 '
                         'naming the store, its generation and the marker '
                         'to write back; nothing written; writing it back '
                         'as told opens the current store') as row:
            self.claim(INSTANCES[0])
            older = digest(self.db)
            self.claim(INSTANCES[1])
            current = digest(self.db)
            marker = self.db + '.id'
            named = digest(marker)
            for content in (current, older):
                with open(self.db, 'wb') as handle:
                    handle.write(content)
                _unlink(marker)
                row.cases += self.refused_everywhere(
                    'but its marker %s is missing' % marker, self.db)
                self.assertEqual(content, digest(self.db))
                self.assertFalse(os.path.exists(marker))
            with open(self.db, 'wb') as handle:
                handle.write(current)
            _out, err = self.cli('devices', expect=3)
            told = err[err.index('write {') + len('write '):
                       err.index('} to ') + 1]
            with open(marker, 'w') as handle:
                handle.write(told)
            self.assertEqual(json.loads(named), json.loads(told))
            self.assertEqual([INSTANCES[0], INSTANCES[1]],
                             sorted(self.holder()))

    def test_tables_disagree(self):
        with self.record('state', 'a device row set back to available, '
                         'deleted, or given to another instance, or an '
                         'instance record dropped, in SQLite while the '
                         'other table still says otherwise (issue 31)',
                         'every command exits 3 naming the device, the '
                         'instance and what each table says; nothing '
                         'written, the device never handed out again'
                         ) as row:
            self.claim(INSTANCES[0])
            (slot,) = self.holder()[INSTANCES[0]]
            clean = digest(self.db)
            for sql, text in (
                    ("UPDATE devices SET status = 'available', "
                     "instance_uuid = NULL, request_id = NULL WHERE "
                     "address = '%s'" % slot,
                     'instance %s lists device %s, which is available'
                     % (INSTANCES[0], slot)),
                    ("DELETE FROM devices WHERE address = '%s'" % slot,
                     'which is not in the devices table'),
                    ("UPDATE devices SET instance_uuid = '%s' WHERE "
                     "address = '%s'" % (INSTANCES[1], slot),
                     'but instance %s lists it' % INSTANCES[0]),
                    ("DELETE FROM instances", 'which has no record')):
                with open(self.db, 'wb') as handle:
                    handle.write(clean)
                conn = sqlite3.connect(self.db)
                conn.execute(sql)
                conn.commit()
                conn.close()
                edited = digest(self.db)
                row.cases += self.refused_everywhere(
                    'its devices and instances tables disagree', self.db)
                _out, err = self.claim(INSTANCES[2], expect=3)
                self.assertIn(text, err)
                self.assertEqual(edited, digest(self.db))

    def test_first_start_killed_anywhere(self):
        trials = recorder.scale(30, 300)
        with self.record('crash', 'a first start (a new store: database, '
                         'then its marker, then the commit that publishes '
                         'it) SIGKILLed at a random point (issue 31)',
                         'the directory always opens again, '
                         'with its marker; never refused (a store whose '
                         'marker was never published is not a lost one)'
                         ) as row:
            rng = random.Random(31)
            logs = os.path.join(self.tmp, 'logs')
            os.mkdir(logs)
            for trial in range(trials):
                state = os.path.join(self.tmp, 'first-%d' % trial)
                db = os.path.join(state, 'state.db')
                child = procs.spawn(self, logs, _first_start, db)
                self.assertEqual({'ready': True}, child.next())
                time.sleep(rng.uniform(0, 0.12))
                child.kill()
                store_mod.SqliteStore(db).close()
                self.assertTrue(os.path.exists(db + '.id'))
                row.cases += 1


def _first_start(channel, db):
    channel.send(ready=True)
    store_mod.SqliteStore(db).close()


class OneHostTest(StateDirTestCase):

    def test_two_connections_on_one_state_dir(self):
        with self.record('state', 'two connections (the sample host, the '
                         'same XML at another path) on one --state-dir '
                         '(item 6)', 'the second exits 3 naming both; the '
                         'first host\'s state is untouched') as row:
            copy = os.path.join(self.tmp, 'copy.xml')
            shutil.copy(data.SAMPLE_HOST_XML, copy)
            self.claim(INSTANCES[0])
            before = self.holder()
            for argv in (('devices',), ('claim', '--extra-spec', VGPU)):
                row.cases += 1
                _out, err = self.cli('--connection', 'test://' + copy,
                                     *argv, expect=3)
                self.assertIn('belongs to', err)
                self.assertIn('bundled sample host', err)
                self.assertIn('test://' + copy, err)
            self.assertEqual(before, self.holder())
            row.cases += 1
            # And the default state directories keep them apart.
            code, _out, err = run('--connection', 'test://' + copy,
                                  'claim', '--extra-spec', VGPU)
            self.assertEqual(0, code, err)


class NotOursTest(StateDirTestCase):

    def test_foreign_sqlite_file(self):
        with self.record('state', 'a foreign SQLite file (rollback journal '
                         'or WAL) as state.db (item 8)', 'exit 3 naming it; '
                         'not one byte changed (no WAL switch)') as row:
            os.makedirs(self.state)
            for mode in ('delete', 'wal'):
                conn = sqlite3.connect(self.db)
                conn.execute('PRAGMA journal_mode=%s' % mode)
                conn.execute('CREATE TABLE nova_things (id INTEGER)')
                conn.commit()
                conn.close()
                before = digest(self.db)
                row.cases += 1
                _out, err = self.cli('devices', expect=3)
                self.assertIn('not a nova-pci-mdev state store', err)
                self.assertEqual(before, digest(self.db))
                os.unlink(self.db)

    def test_symbolic_links(self):
        with self.record('state', 'state.db, its marker or mdevs.json a '
                         'symbolic link to another file (item 8)',
                         'exit 3 naming the link; the target is not '
                         'written') as row:
            elsewhere = os.path.join(self.tmp, 'elsewhere')
            self.claim(INSTANCES[0], state=elsewhere)
            self.claim(INSTANCES[1])
            for name in ('state.db', 'state.db.id', 'mdevs.json'):
                row.cases += 1
                link = os.path.join(self.state, name)
                target = os.path.join(elsewhere, name)
                saved = link + '.saved'
                os.rename(link, saved)
                os.symlink(target, link)
                before = digest(target)
                _out, err = self.cli('claim', '--extra-spec', VGPU,
                                     expect=3)
                self.assertIn(link, err)
                self.assertEqual(before, digest(target), name)
                os.unlink(link)
                os.rename(saved, link)
            self.assertEqual([INSTANCES[1]], sorted(self.holder()))


class PathErrorTest(StateDirTestCase):

    def test_state_dir_that_cannot_be_one(self):
        with self.record('exits', '--state-dir a file, below a file, under '
                         '/proc or /sys (item 4)', 'exit 2 naming the path '
                         'and the rule; no traceback') as row:
            afile = os.path.join(self.tmp, 'afile')
            open(afile, 'w').close()
            for path, rule in (
                    (afile, 'is a file, not a directory'),
                    (os.path.join(afile, 'x', 'y'),
                     'is below %s, which is a file' % afile),
                    ('/proc/nova-pci-mdev', 'a proc filesystem'),
                    ('/proc/self/x', 'a proc filesystem'),
                    ('/sys/kernel/nova-pci-mdev', 'a sysfs filesystem')):
                row.cases += 1
                _out, err = self.cli('devices', state=path, expect=2)
                self.assertIn("--state-dir '%s'" % path, err)
                self.assertIn(rule, err)

    def test_read_only_state_dir(self):
        with self.record('exits', 'a state directory that cannot be '
                         'written: immutable / read-only mount (EROFS), '
                         'first run or with state (item 4)', 'exit 3 '
                         'naming the file; no traceback, nothing '
                         'claimed') as row:
            fresh = os.path.join(self.tmp, 'fresh')
            for directory, first in ((fresh, True), (self.state, False)):
                os.makedirs(directory, exist_ok=True)
                if not first:
                    self.claim(INSTANCES[0])
                with statedir.ReadOnlyDir(directory):
                    row.cases += 1
                    _out, err = self.cli('claim', '--extra-spec', VGPU,
                                         state=directory, expect=3)
                    self.assertIn(directory, err)
            self.assertEqual([INSTANCES[0]], sorted(self.holder()))
            prefix = statedir.read_only_mount_command(self.state)
            if prefix is None:
                return      # no mount namespace here: the cases above held
            for argv in (('devices',), ('claim', '--extra-spec', VGPU)):
                row.cases += 1
                proc = subprocess.run(
                    prefix + [SCRIPT, '--state-dir', self.state] +
                    list(argv), capture_output=True, text=True, timeout=120,
                    stdin=subprocess.DEVNULL)
                self.assertEqual(3, proc.returncode, proc.stderr)
                self.assertIn('Read-only file system (EROFS)', proc.stderr)
                self.assertIn(self.state, proc.stderr)
                self.assertNotIn('Traceback', proc.stderr)

    def test_config_file_paths(self):
        with self.record('exits', '--config-file naming a directory or a '
                         'missing file (item 5)', 'exit 2 naming the path; '
                         'no traceback') as row:
            for path, rule in ((self.tmp, 'is a directory'),
                               (os.path.join(self.tmp, 'nope.conf'),
                                'file not found')):
                for command in ('devices', 'check-config'):
                    row.cases += 1
                    _out, err = self.cli('--config-file', path, command,
                                         expect=2)
                    self.assertIn(path, err)
                    self.assertIn(rule, err)

    def test_input_files_that_block_or_never_end(self):
        """A FIFO named as an input file would block the command forever,
        a device such as /dev/zero would be read until memory runs out,
        a huge file would be read whole. If the guard failed, a writer
        opens each FIFO after 10 s and closes it, and the huge file is
        sparse, so the test fails on the message instead of hanging
        (/dev/zero itself is in the unit tests of input_files)."""
        fifo = os.path.join(self.tmp, 'pipe')
        os.mkfifo(fifo)
        host = os.path.join(self.tmp, 'host.xml')
        os.mkfifo(host)
        unblock = fifos.Unblocker(10, fifo, host)
        unblock.start()
        self.addCleanup(unblock.done.set)
        live = ('live-move-check', '--extra-spec', VGPU, '--source')
        huge = os.path.join(self.tmp, 'huge.json')
        with open(huge, 'wb') as handle:      # sparse: costs no disk
            handle.truncate(input_files.MAX_BYTES + 1)
        cases = [
            (('--config-file', fifo, 'devices'), '--config-file', 'a FIFO'),
            (('--config-file', huge, 'check-config'), '--config-file',
             'is %d bytes' % (input_files.MAX_BYTES + 1)),
            (('--connection', 'test://' + host, 'devices'), '--connection',
             'is a FIFO'),
            (('--connection', 'test:///dev/null', 'devices'),
             '--connection', 'a character device'),
            (live + (fifo,), '--source', 'a FIFO'),
            (live + (huge,), '--source', 'more than the'),
        ]
        with self.record('exits', 'an input file that is a FIFO or a '
                         'device (--config-file, a test:/// host file, '
                         '--source)', 'at once, naming the option, the path and '
                         'what it is: exit 2, for a host file exit 3 like '
                         'every unusable host description') as row:
            for argv, option, rule in cases:
                row.cases += 1
                # a host description that cannot be used is a host failure
                _out, err = self.cli(*argv, expect=3 if option ==
                                     '--connection' else 2)
                self.assertIn(option, err)
                self.assertIn(rule, err)
                self.assertIn(argv[argv.index(option) + 1].replace(
                    'test://', ''), err)


# -- the property ---------------------------------------------------------

def _truncate(path):
    if os.path.lexists(path):
        open(path, 'w').close()


def _unlink(path):
    if os.path.lexists(path):
        os.unlink(path)


FAULTS = ('truncate', 'delete', 'delete-marker', 'delete-mdevs',
          'truncate-mdevs', 'wipe', 'replace-other', 'replace-old',
          'read-only')
#: 'between': before the command opens the state directory.
POINTS = ('between', 'before-create', 'after-create', 'before-commit',
          'after-commit')
FAILURES = (exception.StoreError, exception.MdevError,
            exception.RequestNotSatisfiable, exception.InvalidValue)
steps = st.lists(st.tuples(
    st.sampled_from(('claim', 'claim', 'release')),
    st.integers(0, len(INSTANCES) - 1),
    st.one_of(st.none(), st.tuples(st.sampled_from(FAULTS),
                                   st.sampled_from(POINTS)))),
    min_size=1, max_size=6)


class _World(object):
    """One state directory, its faults, and what the commands reported.

    ``reported``: instance -> devices of every claim reported done and not
    reported released since. ``refused``: the directory was refused (an
    operator would now restore it or move it away: only 'wipe', moving it
    away, is applied to it then).
    """

    def __init__(self, tmp):
        self.tmp = tmp
        self.state = os.path.join(tmp, 'state')
        self.db = os.path.join(self.state, 'state.db')
        self.other = os.path.join(tmp, 'other', 'state.db')
        self.old = os.path.join(tmp, 'old.db')
        self.reported = {}
        self.refused = False

    def fault(self, kind):
        """Apply ``kind``; returns the undo of a read-only fault."""
        db, state = self.db, self.state
        if self.refused and kind != 'wipe':
            return None
        if kind == 'truncate':
            _truncate(db)
        elif kind == 'delete':
            _unlink(db)
        elif kind == 'delete-marker':
            _unlink(db + '.id')
        elif kind == 'delete-mdevs':
            _unlink(os.path.join(state, 'mdevs.json'))
        elif kind == 'truncate-mdevs':
            _truncate(os.path.join(state, 'mdevs.json'))
        elif kind == 'wipe':
            shutil.rmtree(state, ignore_errors=True)
            self.reported = {}
            self.refused = False
        elif kind.startswith('replace') and os.path.isdir(state):
            source = self.other if kind == 'replace-other' else self.old
            if os.path.exists(source):
                shutil.copy(source, db + '.tmp')
                os.replace(db + '.tmp', db)
        elif kind == 'read-only' and os.path.isdir(state):
            fixture = statedir.ReadOnlyDir(state)
            fixture.setUp()
            return fixture.cleanUp
        return None

    def keep_old_copy(self):
        if os.path.exists(self.db) and not self.refused:
            shutil.copy(self.db, self.old)

    def step(self, op, instance, fault):
        """Run one command with its fault; True if it reported success."""
        undo = []
        kind, point = fault or (None, None)
        if point == 'between':
            undo.append(self.fault(kind))

        def hook(where, **_details):
            if where == point and point != 'between':
                undo.append(self.fault(kind))
        compute = None
        try:
            compute = procs.cli_compute(self.state)
            hooked = procs.hooked(compute, hook)
            if op == 'claim':
                result = hooked.claim(instance, flavor_mod.parse(
                    CREATES, compute.settings.aliases))
                devices = sorted(d.address for d in result.devices)
            else:
                hooked.release(instance)
            if (kind, point) == ('wipe', 'after-commit'):
                # stored, then the operator moved the directory away
                return True
            if op == 'claim':
                self.reported[instance] = devices
            else:
                self.reported.pop(instance, None)
            return True
        except FAILURES:
            return False
        finally:
            if compute is not None:
                procs.close(compute)
            for each in undo:
                if each is not None:
                    each()

    def observe(self, test):
        """A fresh service: refuses, or holds exactly what was reported.

        It starts the way nova-compute does (``restore``: mdevs the host
        lost, as at a reboot, are created again); a state file it cannot
        trust (the store, or the emulated host's mdevs.json) is a refusal
        at construction or at that first sync.
        """
        compute = None
        try:
            compute = procs.cli_compute(self.state)
            _report, restored = compute.sync()
        except exception.StoreError:
            if compute is not None:
                procs.close(compute)
            self.refused = True
            return 'refused'
        try:
            test.assertEqual({}, restored.failed)
            test.assertFalse(self.refused, 'a refused directory was '
                             'accepted again without being moved away')
            held = hosts.held(compute)
            test.assertEqual(self.reported, held)
            owners = {}
            for instance, devices in held.items():
                for address in devices:
                    test.assertNotIn(address, owners)
                    owners[address] = instance
            mdevs = compute.mdevs.backend.list()
            for address in owners:
                test.assertIn(address, mdevs)
        finally:
            procs.close(compute)
        return 'held'


class FaultPropertyTest(StateDirTestCase):

    def test_random_faults_at_random_points(self):
        with self.record('state', 'random state-dir faults (truncate, '
                         'delete, replace by another store or an older '
                         'copy, read-only, marker or mdevs lost, wiped) at '
                         'random points of random claims and releases',
                         'no device ever held twice; every claim reported '
                         'done is stored (a fresh service holds exactly '
                         'those) or the directory is refused') as row:
            other = os.path.join(self.tmp, 'other')
            self.claim(INSTANCES[0], state=other)

            @recorder.examples(8, 300)
            @given(steps)
            def check(plan):
                row.cases += 1
                tmp = tempfile.mkdtemp(dir=self.tmp)
                shutil.copytree(other, os.path.join(tmp, 'other'))
                world = _World(tmp)
                for op, index, fault in plan:
                    was_refused = world.refused
                    world.keep_old_copy()
                    ok = world.step(op, INSTANCES[index], fault)
                    if was_refused and (fault is None or fault[0] != 'wipe'):
                        self.assertFalse(ok, 'a refused directory served '
                                         'a %s' % op)
                    world.observe(self)
                shutil.rmtree(tmp)

            check()
