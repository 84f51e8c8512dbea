"""What the hardening tests tried and what came of it, as table rows.

Every hardening test wraps each thing it tries (a parser under fuzzing, one
injected fault, one crash point...) in :meth:`HardeningTestCase.record`::

    with self.record('fault', 'mdev create fails with EBUSY',
                     'claim rolled back, nothing leaked') as row:
        ...                       # the checks
        row.cases += 1            # one per input or run tried

A row ends ``held`` when its block finishes, ``FAILED: <error>`` when the
block raises (the test fails with it). When ``$NOVA_PCI_MDEV_RESULTS_DIR``
is set, each row is appended as one JSON line to ``<dir>/<test id>.jsonl``
(one file per test, so parallel stestr workers never share a file);
:mod:`.render` turns the directory into ``docs/RELIABILITY.md``. Without
the variable nothing is written: the normal suite runs the same checks.

Scale: ``$NOVA_PCI_MDEV_HARDENING=full`` (the ``hardening`` tox env) runs
the heavy variants (more hypothesis examples, 1,000 concurrent operations);
unset, the light variants keep the normal suite fast. :func:`scale` picks.
"""

import contextlib
import dataclasses
import json
import os
import re

import hypothesis
import testtools

RESULTS_ENV = 'NOVA_PCI_MDEV_RESULTS_DIR'
MODE_ENV = 'NOVA_PCI_MDEV_HARDENING'
FULL = 'full'
#: Areas in the order the table shows them.
AREAS = ('fuzz', 'paths', 'exits', 'config', 'capacity', 'state', 'fault',
         'crash', 'concurrency', 'lifecycle', 'tracker')


def is_full():
    return os.environ.get(MODE_ENV) == FULL


def mode():
    return FULL if is_full() else 'light'


def scale(light, full):
    """``full`` under the hardening env, else ``light``."""
    return full if is_full() else light


def examples(light, full=None):
    """Hypothesis settings: derandomized (the table is reproducible), no
    deadline and no example database (nothing written to the tree).

    The light variant does not shrink a failing example (shrinking can
    take longer than the search): the normal suite reports the first
    failing input as found; the full run shrinks it to a minimal one.
    """
    phases = tuple(hypothesis.Phase) if is_full() else (
        hypothesis.Phase.explicit, hypothesis.Phase.generate)
    return hypothesis.settings(
        max_examples=scale(light, full if full is not None else light * 10),
        deadline=None, database=None, derandomize=True, phases=phases,
        suppress_health_check=list(hypothesis.HealthCheck))


@dataclasses.dataclass
class Row:
    area: str
    subject: str
    outcome: str
    test: str
    cases: int = 0
    status: str = 'running'
    mode: str = dataclasses.field(default_factory=mode)


def _short(exc):
    text = '%s: %s' % (type(exc).__name__, exc)
    text = re.sub(r'\s+', ' ', text).strip()
    return text if len(text) <= 160 else text[:157] + '...'


def write_row(row):
    directory = os.environ.get(RESULTS_ENV)
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    safe = re.sub(r'[^A-Za-z0-9_.-]+', '_', row.test)[-150:]
    with open(os.path.join(directory, safe + '.jsonl'), 'a') as handle:
        handle.write(json.dumps(dataclasses.asdict(row), sort_keys=True)
                     + '\n')


class HardeningTestCase(testtools.TestCase):
    """Base of the hardening tests: :meth:`record` rows."""

    @contextlib.contextmanager
    def record(self, area, subject, outcome):
        if area not in AREAS:
            raise ValueError('area %r is not one of %s' % (area, AREAS))
        row = Row(area=area, subject=subject, outcome=outcome,
                  test=self.id())
        try:
            yield row
        except BaseException as exc:
            row.status = 'FAILED: %s' % _short(exc)
            raise
        else:
            if row.cases < 1:
                row.status = 'FAILED: no case was run'
                raise AssertionError('%s: no case was run' % subject)
            row.status = 'held'
        finally:
            write_row(row)
