"""Run the hardening tests and write docs/RELIABILITY.md from their rows.

    python -m nova_pci_mdev.tests.hardening.run [--light]
        [--output docs/RELIABILITY.md] [--concurrency 2] [-- STESTR FILTER]

Full variants unless ``--light``. The tests record into a fresh temporary
results directory (``$NOVA_PCI_MDEV_RESULTS_DIR``), stestr runs them, and
:mod:`.render` writes the document even when tests fail (their rows say
FAILED). The exit code is stestr's.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import render

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hardening.run')
    parser.add_argument('--light', action='store_true',
                        help='the variants of the normal suite')
    parser.add_argument('--output', default=os.path.join(
        REPO, 'docs', 'RELIABILITY.md'))
    parser.add_argument('--concurrency', default='2')
    parser.add_argument('filters', nargs='*')
    args = parser.parse_args(argv)
    results = tempfile.mkdtemp(prefix='nova-pci-mdev-reliability-')
    env = dict(os.environ)
    env[recorder.RESULTS_ENV] = results
    if args.light:
        env.pop(recorder.MODE_ENV, None)
    else:
        env[recorder.MODE_ENV] = recorder.FULL
    try:
        code = subprocess.call(
            [sys.executable, '-m', 'stestr', '--test-path',
             './nova_pci_mdev/tests/hardening', '--top-dir', './', 'run',
             '--concurrency', args.concurrency] + args.filters,
            cwd=REPO, env=env)
        rows = render.load_rows(results)
        if rows:
            os.makedirs(os.path.dirname(os.path.abspath(args.output)),
                        exist_ok=True)
            with open(args.output, 'w') as handle:
                handle.write(render.render(rows))
            sys.stdout.write('%s: %d rows\n' % (args.output, len(rows)))
        else:
            sys.stderr.write('no results recorded; %s not written\n'
                             % args.output)
            code = code or 1
    finally:
        shutil.rmtree(results, ignore_errors=True)
    return code


if __name__ == '__main__':
    sys.exit(main())
