"""Running host commands for the real-host tool, with errors that say which
step failed.

Every command the tool runs goes through :func:`run`: its output is appended
to a log file, and a non-zero exit raises :class:`StepFailed` naming the
step, the command, the exit code and the last lines of its output, so that
``tools/realhost`` can end with one clear line instead of a traceback.
"""

import hashlib
import os
import shlex
import subprocess
import sys
import time


class StepFailed(Exception):
    """A build or run step failed; ``str()`` is the message for the user."""

    def __init__(self, step, reason):
        super().__init__('%s: %s' % (step, reason))
        self.step = step
        self.reason = reason


class Log:
    """Appends command output to ``path``; prints progress lines to stderr."""

    def __init__(self, path, quiet=False):
        self.path = path
        self.quiet = quiet
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._start = time.monotonic()

    def note(self, text):
        stamp = '[realhost %6.1fs] %s' % (time.monotonic() - self._start, text)
        with open(self.path, 'a', encoding='utf-8') as handle:
            handle.write(stamp + '\n')
        if not self.quiet:
            print(stamp, file=sys.stderr, flush=True)


def tail(text, lines=15):
    """The last ``lines`` lines of ``text`` (for error messages)."""
    return '\n'.join(text.rstrip().splitlines()[-lines:])


def run(log, step, argv, env=None, timeout=3600, check=True, cwd=None,
        input_text=None):
    """Run ``argv``; return the CompletedProcess (stdout and stderr merged).

    ``check`` raises :class:`StepFailed` on a non-zero exit, a missing
    program or a time-out, with the output's tail in the message.
    """
    with open(log.path, 'a', encoding='utf-8') as handle:
        handle.write('$ %s\n' % shlex.join(argv))
    full_env = dict(os.environ, **(env or {}))
    try:
        proc = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors='replace', env=full_env, timeout=timeout,
            cwd=cwd, input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise StepFailed(step, 'cannot run %s: %s' % (argv[0], exc))
    except subprocess.TimeoutExpired as exc:
        out = exc.output or ''
        if isinstance(out, bytes):
            out = out.decode('utf-8', 'replace')
        raise StepFailed(step, '%s did not finish in %d s; last output:\n%s'
                         % (shlex.join(argv), timeout, tail(out)))
    with open(log.path, 'a', encoding='utf-8') as handle:
        handle.write(proc.stdout)
        handle.write('[exit %d]\n' % proc.returncode)
    if check and proc.returncode != 0:
        raise StepFailed(step, '%s exited %d; last output:\n%s\n(full log: %s)'
                         % (shlex.join(argv), proc.returncode,
                            tail(proc.stdout), log.path))
    return proc


def digest(*parts):
    """sha256 hex of the parts (str or bytes), each length-prefixed."""
    sha = hashlib.sha256()
    for part in parts:
        data = part.encode('utf-8') if isinstance(part, str) else part
        sha.update(b'%d:' % len(data))
        sha.update(data)
    return sha.hexdigest()
