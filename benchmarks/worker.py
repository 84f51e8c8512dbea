"""A child process of a benchmark that answers JSON requests, one a line.

The runner writes one JSON object per line to the child's standard input
(the operation under ``op`` and its arguments) and reads one JSON object
per line back. Used by :mod:`benchmarks.run` (our tracker, Nova's, the
floors) and :mod:`benchmarks.placement` (the Placement server).
"""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Worker:
    """A child process answering JSON requests, one per line.

    ``what`` names it in the message of a failure; ``env`` is its
    environment (the runner's by default).
    """

    def __init__(self, argv, what, env=None):
        self.what = what
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, op, **request):
        request['op'] = op
        self.proc.stdin.write(json.dumps(request) + '\n')
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit('%s failed (exit %s)' % (self.what,
                                                      self.proc.wait()))
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        if self.proc.wait():
            raise SystemExit('%s failed (exit %d)' % (self.what,
                                                      self.proc.returncode))
