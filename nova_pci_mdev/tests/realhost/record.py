"""Recording checks inside the VM: what ran, what the host returned, pass
or fail.

A check is a named step of the scenario. Everything it runs goes through
:meth:`Check.run` (a command, with a time-out, never a shell) or is noted
with :meth:`Check.observe`; :meth:`Check.expect` fails the check with a
message when a condition does not hold. An exception inside a check fails
that check (its message and the traceback's last line are recorded) and the
scenario goes on with the next one, unless the check was ``required``, in
which case :class:`Abort` stops the phase: later checks that depend on it
would only repeat the same failure.
"""

import contextlib
import json
import os
import subprocess
import sys
import time
import traceback


class Abort(Exception):
    """A required check failed; the phase stops here."""


class CheckFailed(Exception):
    """Raised by :meth:`Check.expect`; ends the check as failed."""


class Result:
    def __init__(self, argv, rc, stdout, stderr, seconds):
        self.argv = argv
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds

    @property
    def output(self):
        if self.stderr.strip():
            return '%s\n[stderr]\n%s' % (self.stdout.rstrip(), self.stderr)
        return self.stdout

    def json(self):
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise CheckFailed('%s printed no JSON (%s):\n%s' % (
                ' '.join(self.argv), exc, self.output[-800:]))


class Check:
    def __init__(self, ident, title):
        self.record = {'id': ident, 'title': title, 'ok': None,
                       'detail': '', 'observed': []}

    def observe(self, what, output, rc=None):
        self.record['observed'].append({'what': what, 'rc': rc,
                                        'output': str(output)})

    def run(self, argv, timeout=300, expect=None, input_text=None,
            env=None):
        """Run ``argv``; record it; ``expect`` (an exit code) is checked."""
        start = time.monotonic()
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, errors='replace',
                timeout=timeout, input=input_text,
                env=dict(os.environ, **(env or {})),
                stdin=None if input_text is not None else subprocess.DEVNULL)
            result = Result(argv, proc.returncode, proc.stdout, proc.stderr,
                            time.monotonic() - start)
        except subprocess.TimeoutExpired as exc:
            result = Result(argv, 'timeout after %d s' % timeout,
                            _text(exc.stdout), _text(exc.stderr), timeout)
        except OSError as exc:
            result = Result(argv, 'cannot run: %s' % exc, '', '', 0)
        self.observe(' '.join(argv), result.output, result.rc)
        if expect is not None and result.rc != expect:
            raise CheckFailed('%s exited %s, expected %s' % (
                ' '.join(argv), result.rc, expect))
        return result

    def expect(self, condition, message):
        if not condition:
            raise CheckFailed(message)

    def note(self, text):
        self.record['detail'] = ('%s\n%s' % (self.record['detail'], text)
                                 ).strip()


def _text(data):
    if data is None:
        return ''
    if isinstance(data, bytes):
        return data.decode('utf-8', 'replace')
    return data


class Recorder:
    """The checks of one phase, saved to ``<out>/checks-<phase>.json``
    after every check (a VM that dies keeps what it had).

    Each check also prints two progress lines (``realhost: check ...``,
    then ``realhost: PASS|FAIL ...``) on ``progress``, the standard output
    by default (the host side follows the VM's console with them); the
    tests hand in their own stream.
    """

    def __init__(self, phase, out, progress=None):
        self.phase = phase
        self.out = out
        self.progress = progress
        self.checks = []
        self.facts = {}

    def _say(self, line):
        print(line, file=self.progress or sys.stdout, flush=True)

    @contextlib.contextmanager
    def check(self, ident, title, required=False):
        check = Check(ident, title)
        check.record['phase'] = self.phase
        start = time.monotonic()
        self._say('realhost: check %s: %s' % (ident, title))
        try:
            yield check
            check.record['ok'] = True
        except CheckFailed as exc:
            check.record['ok'] = False
            check.note(str(exc))
        except Exception as exc:
            check.record['ok'] = False
            check.note('%s: %s\n%s' % (type(exc).__name__, exc,
                                       traceback.format_exc(limit=3)))
        check.record['seconds'] = round(time.monotonic() - start, 1)
        self.checks.append(check.record)
        self.save()
        self._say('realhost: %s %s' % ('PASS' if check.record['ok']
                                       else 'FAIL', ident))
        if required and not check.record['ok']:
            raise Abort(ident)

    def fact(self, key, value):
        self.facts[key] = value
        self.save()

    def save(self):
        for name, data in (('checks', self.checks), ('facts', self.facts)):
            path = os.path.join(self.out, '%s-%s.json' % (name, self.phase))
            with open(path + '.tmp', 'w', encoding='utf-8') as handle:
                json.dump(data, handle, indent=1)
            os.replace(path + '.tmp', path)

    def failed(self):
        return any(not c['ok'] for c in self.checks)
