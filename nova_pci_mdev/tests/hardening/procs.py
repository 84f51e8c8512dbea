"""Real processes on one state directory, killed where a test wants.

:func:`spawn` forks a child that runs ``target(channel, *args)``: a real
process (its own libvirt connection, SQLite connection and emulated
backend, built by the CLI's wiring, :func:`cli_compute`) that the test can
SIGKILL. Forking instead of exec'ing a new interpreter saves the second of
imports per process; the child never returns into the test runner (it
leaves through ``os._exit``) and its stdout/stderr go to a file, so the
subunit stream of stestr stays clean.

Kill points are test-only wrappers handed to ``ComputeHost``'s constructor
(no hook in product code): :class:`HookedBackend` around the mdev backend
(``before-create``, ``after-create``, ``before-remove``, ``after-remove``)
and :class:`HookedStore` around the store (``before-commit``: the
transaction's writes are done but not committed; ``after-commit``). When
the planned point is reached, the child reports it on its channel and
blocks until the parent kills it with SIGKILL.
"""

import collections
import contextlib
import json
import os
import select
import signal
import traceback

import libvirt

import nova_pci_mdev
from nova_pci_mdev import data
from nova_pci_mdev.compute import host as compute_mod
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev

#: How long a test waits for a child's next message before failing.
TIMEOUT = 120.0


def cli_compute(state_dir):
    """The bundled host's ComputeHost, opened through the public API
    (:func:`nova_pci_mdev.open_compute_host`) as the CLI opens it."""
    return nova_pci_mdev.open_compute_host(
        data.sample_connection_uri(), state_dir,
        nova_pci_mdev.load_settings([data.SAMPLE_NOVA_CONF]))


def close(compute):
    """Close what a ComputeHost opened (store, libvirt connection); a
    second call does nothing."""
    compute.store.close()
    with contextlib.suppress(libvirt.libvirtError):   # closed already
        compute.host.connection.close()


class Channel(object):
    """The child's end: JSON messages up, and a pipe to block on."""

    def __init__(self, fd, block_fd):
        self._fd = fd
        self._block_fd = block_fd

    def send(self, **message):
        os.write(self._fd, (json.dumps(message) + '\n').encode())

    def halt(self, **message):
        """Report ``message`` and wait to be killed."""
        self.send(**message)
        while True:
            if not os.read(self._block_fd, 1):
                os._exit(3)      # the parent went away


class Child(object):
    """The parent's handle on one child process."""

    def __init__(self, pid, fd, block_w, log):
        self.pid = pid
        self._fd = fd
        self._block_w = block_w
        self._buffer = b''
        self.log = log
        self.status = None

    def messages(self, timeout=TIMEOUT):
        """Every message until the child closes its end (exits)."""
        out = []
        while True:
            message = self.next(timeout)
            if message is None:
                return out
            out.append(message)

    def next(self, timeout=TIMEOUT):
        """The next message, or None when the child has exited."""
        while b'\n' not in self._buffer:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                self.kill()
                raise AssertionError('child %d sent nothing for %ss; log:\n'
                                     '%s' % (self.pid, timeout, self.output()))
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b'\n', 1)
        return json.loads(line)

    def kill(self):
        """SIGKILL and reap; returns the wait status."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            return self.wait()
        return self.status

    def wait(self):
        if self.status is None:
            _pid, self.status = os.waitpid(self.pid, 0)
            for fd in (self._fd, self._block_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        return self.status

    @property
    def killed(self):
        return (self.status is not None and os.WIFSIGNALED(self.status)
                and os.WTERMSIG(self.status) == signal.SIGKILL)

    def output(self):
        try:
            with open(self.log) as handle:
                return handle.read()[-3000:]
        except OSError:
            return ''


def spawn(test, log_dir, target, *args):
    """Fork a child running ``target(channel, *args)``; killed at cleanup.

    The child ends with exit code 0 after sending ``{"done": result}``, or
    1 after ``{"error": traceback}``.
    """
    up_r, up_w = os.pipe()
    block_r, block_w = os.pipe()
    log = os.path.join(log_dir, 'child-%d.log' % len(os.listdir(log_dir)))
    pid = os.fork()
    if pid == 0:       # the child
        code = 1
        try:
            os.close(up_r)
            os.close(block_w)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            channel = Channel(up_w, block_r)
            try:
                result = target(channel, *args)
            except BaseException:
                channel.send(error=traceback.format_exc())
            else:
                channel.send(done=result)
                code = 0
        finally:
            os._exit(code)
    os.close(up_w)
    os.close(block_r)
    child = Child(pid, up_r, block_w, log)
    test.addCleanup(child.kill)
    return child


class KillPoint(object):
    """Halts the child at the ``nth`` time ``point`` is reached."""

    def __init__(self, channel, point=None, nth=1):
        self.channel = channel
        self.point = point
        self.nth = nth
        self.seen = collections.Counter()

    def __call__(self, point, **details):
        self.seen[point] += 1
        if point == self.point and self.seen[point] == self.nth:
            self.channel.halt(at=point, **details)


class HookedBackend(mdev.MdevBackend):
    """An mdev backend that calls ``hook`` around creations and removals."""

    def __init__(self, backend, hook):
        self._backend = backend
        self._hook = hook

    def list(self):
        return self._backend.list()

    def create(self, uuid, parent, mdev_type):
        self._hook('before-create', uuid=uuid)
        self._backend.create(uuid, parent, mdev_type)
        self._hook('after-create', uuid=uuid)

    def remove(self, uuid):
        self._hook('before-remove', uuid=uuid)
        self._backend.remove(uuid)
        self._hook('after-remove', uuid=uuid)

    def available(self, parent, mdev_type):
        return self._backend.available(parent, mdev_type)


class HookedStore(object):
    """A store whose transactions call ``hook`` before and after COMMIT."""

    def __init__(self, store, hook):
        self._store = store
        self._hook = hook

    def __getattr__(self, name):
        return getattr(self._store, name)

    @contextlib.contextmanager
    def transaction(self):
        with self._store.transaction() as tx:
            yield tx
            self._hook('before-commit')
        self._hook('after-commit')


def hooked(compute, hook):
    """The same host, store and backend with ``hook`` at the kill points."""
    return compute_mod.ComputeHost(
        compute.host, compute.settings, HookedStore(compute.store, hook),
        mdev.MdevManager(HookedBackend(compute.mdevs.backend, hook)),
        compute.topology)
