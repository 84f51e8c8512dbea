"""Render the rows the hardening tests recorded into docs/RELIABILITY.md.

    python -m nova_pci_mdev.tests.hardening.render RESULTS_DIR OUTPUT.md

``RESULTS_DIR`` holds the ``*.jsonl`` files of :mod:`.recorder` (one row
per line). The output is a Markdown document: a summary, one table per
area (what was tried, how many cases, the expected outcome, what
happened, the test) and the findings (every row that did not hold). Rows
are sorted, so the same results give the same document.
"""

import glob
import json
import os
import sys

from nova_pci_mdev.tests.hardening import recorder

TITLES = {
    'fuzz': 'Bad input: property-based fuzzing of every parser',
    'paths': 'Names that reach the filesystem or libvirt',
    'exits': 'Bad paths, files and host descriptions: our error and exit '
             'code, never a traceback',
    'config': 'check-config: device-level mistakes of a nova.conf',
    'capacity': 'Creatable capacity and what is free where',
    'state': 'The state directory: lost, replaced, foreign, shared, '
             'read-only',
    'fault': 'Injected faults (fake libvirt, sysfs)',
    'crash': 'Processes killed (SIGKILL) and restarted',
    'concurrency': 'Concurrent processes on one state directory',
    'lifecycle': 'Host lifecycle with allocated instances',
    'tracker': 'The tracker\'s rules over random claim and free sequences',
}
COMMAND = 'tox -e hardening'
RUN_COMMAND = 'python -m nova_pci_mdev.tests.hardening.run'


def load_rows(directory):
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, '*.jsonl'))):
        with open(path) as handle:
            for line in handle:
                if line.strip():
                    rows.append(json.loads(line))
    return rows


def _cell(text):
    return str(text).replace('|', '\\|').replace('\n', ' ')


def _short_test(test_id):
    """``pkg.module.Class.test (scenario)`` -> ``module.Class.test``."""
    name, _sep, scenario = test_id.partition('(')
    parts = name.strip().split('.')
    short = '.'.join(parts[-3:])
    return short + (' (%s' % scenario if scenario else '')


def _result(row):
    return 'held' if row['status'] == 'held' else '**%s**' % row['status']


def render(rows):
    """The Markdown document for ``rows`` (dicts of :class:`Row` fields)."""
    order = {area: i for i, area in enumerate(recorder.AREAS)}
    rows = sorted(rows, key=lambda r: (order.get(r['area'], 99), r['test'],
                                       r['subject']))
    modes = sorted({r.get('mode', '?') for r in rows})
    failed = [r for r in rows if r['status'] != 'held']
    lines = [
        '# Reliability',
        '',
        'Generated from what the hardening tests recorded '
        '(`nova_pci_mdev/tests/hardening/`); do not edit by hand. '
        'Regenerate with `%s` (the full variants, three to five minutes on '
        'two cores) or '
        '`%s --light` (the variants of the normal suite).' % (
            COMMAND, RUN_COMMAND),
        '',
        '- mode: %s' % ', '.join(modes),
        '- %d things tried, %d cases in all; %d held, %d did not' % (
            len(rows), sum(r['cases'] for r in rows), len(rows) - len(failed),
            len(failed)),
        '',
        'A row is one fault or kind of bad input; *cases* counts the inputs '
        'generated (hypothesis examples), the fault positions or the '
        'operations run; *held* means every case ended in the expected '
        'outcome.',
    ]
    for area in recorder.AREAS:
        area_rows = [r for r in rows if r['area'] == area]
        if not area_rows:
            continue
        lines += ['', '## %s' % TITLES.get(area, area), '',
                  '| # | fault or bad input | cases | expected outcome | '
                  'result | test |',
                  '|---|---|---:|---|---|---|']
        for number, row in enumerate(area_rows, 1):
            lines.append('| %d | %s | %d | %s | %s | `%s` |' % (
                number, _cell(row['subject']), row['cases'],
                _cell(row['outcome']), _cell(_result(row)),
                _cell(_short_test(row['test']))))
    lines += ['', '## Findings', '']
    if failed:
        lines.append('Rows that did not hold (each is a failing test until '
                     'the product is fixed):')
        lines.append('')
        for row in failed:
            lines.append('- %s: %s (`%s`)' % (
                _cell(row['subject']), _cell(row['status']),
                _cell(_short_test(row['test']))))
    else:
        lines.append('None: every row held.')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write('usage: python -m nova_pci_mdev.tests.hardening.'
                         'render RESULTS_DIR OUTPUT.md\n')
        return 2
    rows = load_rows(argv[0])
    if not rows:
        sys.stderr.write('no rows in %s\n' % argv[0])
        return 1
    with open(argv[1], 'w') as handle:
        handle.write(render(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
