"""patches/: the form Nova's reviewers check before they read a line of code.

Every file of the directory is a ``git format-patch`` message numbered in
order, or the README. Each message's subject says ``[PATCH n/N]`` with its
own position and the length of the series, its title fits the 72 columns
of an OpenStack commit title, its message is wrapped at 72 columns (trailers
excepted), and it ends with one ``Signed-off-by:`` and one ``Change-Id:``
(``I`` and 40 hex digits) that no other patch uses. One patch at most
says ``Implements:`` (the one completing the blueprint); the others say
``Partial-Implements:``, follow-ups after it included (0029, virtual mdev
parents, came after 0028 completed the blueprint).

Two subdirectories hold what goes beside the series: ``placement/``, a
series of its own for openstack-placement (the same rules, numbered from
0001, Change-Ids unique across both series), and ``spec/``, the
nova-specs document (``.rst`` files). Each may have a README.md; any other
file or directory is stray.
"""

import email
import email.policy
import os
import re

import fixtures
import testtools

PATCHES = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                       'patches')
#: subdirectory of patches/ -> the one kind of file it holds (besides a
#: README.md): a series of its own, or the spec's documents.
SUBDIRECTORIES = {'placement': '.patch', 'spec': '.rst'}
NAME = re.compile(r'^(\d{4})-[A-Za-z0-9._-]+\.patch$')
SUBJECT = re.compile(r'^\[PATCH (\d+)/(\d+)\] (\S.*)$')
CHANGE_ID = re.compile(r'^Change-Id: (I[0-9a-f]{40})$', re.M)
SIGNED_OFF = re.compile(r'^Signed-off-by: .+ <[^<>@\s]+@[^<>\s]+>$', re.M)
TRAILER = re.compile(r'^[A-Z][A-Za-z-]+: ')
#: the blueprint trailers: only the patch completing it says Implements:
IMPLEMENTS = re.compile(r'^Implements: ', re.M)
PARTIALLY = re.compile(r'^Partially-Implements: ', re.M)
WIDTH = 72


def read_patches(directory=PATCHES):
    """[(file name, subject, commit message)] in file name order."""
    found = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith('.patch'):
            continue
        with open(os.path.join(directory, name), 'rb') as f:
            msg = email.message_from_binary_file(f, policy=email.policy.compat32)
        subject = ' '.join(str(msg['Subject']).split())
        text = msg.get_payload(decode=True).decode('utf-8')
        found.append((name, subject, text.split('\n---\n', 1)[0]))
    return found


def problems(patches, others, seen=None):
    """Each way the series breaks the rules above, as one sentence.

    ``seen`` (Change-Id -> file name) holds the Change-Ids of series
    checked before this one; this one's are added to it.
    """
    out = ['stray file in patches/: %s' % name for name in others]
    total = len(patches)
    seen = {} if seen is None else seen
    implements = [name for name, _, message in patches
                  if IMPLEMENTS.search(message)]
    if len(implements) > 1:
        out.append('Implements: on %s; only one patch completes the '
                   'blueprint, the others say Partial-Implements:'
                   % ', '.join(implements))
    for index, (name, subject, message) in enumerate(patches, 1):
        out.extend(_file_problems(index, total, name, subject, message))
        for change_id in CHANGE_ID.findall(message):
            if change_id in seen:
                out.append('%s: Change-Id %s is also the one of %s'
                           % (name, change_id, seen[change_id]))
            seen.setdefault(change_id, name)
    return out


def _others(directory, kind, subdirectories=()):
    """Names in ``directory`` that are neither ``kind`` files, the
    README.md nor one of ``subdirectories`` (directories end with /)."""
    found = []
    for name in sorted(os.listdir(directory)):
        if os.path.isdir(os.path.join(directory, name)):
            if name not in subdirectories:
                found.append(name + '/')
        elif name != 'README.md' and not name.endswith(kind):
            found.append(name)
    return found


def tree_problems(directory=PATCHES):
    """Every problem of the whole patches/ tree: the Nova series, the
    Placement series, the spec directory."""
    seen = {}
    out = problems(read_patches(directory),
                   _others(directory, '.patch', SUBDIRECTORIES), seen)
    for sub, kind in sorted(SUBDIRECTORIES.items()):
        path = os.path.join(directory, sub)
        if not os.path.isdir(path):
            continue
        others = [sub + '/' + name for name in _others(path, kind)]
        if kind != '.patch':
            out.extend(problems([], others))
            continue
        series = [(sub + '/' + name, subject, message)
                  for name, subject, message in read_patches(path)]
        out.extend(problems(series, others, seen))
    return out


def _file_problems(index, total, name, subject, message):
    out = []
    number = NAME.match(os.path.basename(name))
    if not number or int(number.group(1)) != index:
        out.append('%s: expected file number %04d' % (name, index))
    head = SUBJECT.match(subject)
    position = head and (int(head.group(1)), int(head.group(2)))
    if position != (index, total):
        width = len(str(total))
        out.append('%s: subject %r does not start with [PATCH %0*d/%d]'
                   % (name, subject, width, index, total))
    elif len(head.group(3)) > WIDTH:
        out.append('%s: title is %d characters, more than %d'
                   % (name, len(head.group(3)), WIDTH))
    for line in message.splitlines():
        if len(line) > WIDTH and not TRAILER.match(line):
            out.append('%s: message line of %d characters: %r'
                       % (name, len(line), line))
    if PARTIALLY.search(message):
        out.append('%s: Partially-Implements: is spelled '
                   'Partial-Implements:' % name)
    for rule, trailer in ((SIGNED_OFF, 'Signed-off-by'),
                          (CHANGE_ID, 'Change-Id')):
        if len(rule.findall(message)) != 1:
            out.append('%s: needs exactly one %s: trailer' % (name, trailer))
    return out


class TestSeriesFiles(testtools.TestCase):

    def test_the_series_has_the_form_reviewers_expect(self):
        self.assertGreater(len(read_patches()), 0)
        self.assertEqual([], tree_problems())

    def test_each_rule_is_enforced(self):
        good = ('0001-pci-x.patch', '[PATCH 1/2] pci: x',
                'Body.\n\nSigned-off-by: A <a@b.example>\n'
                'Change-Id: I' + '0' * 40)
        second = ('0002-pci-y.patch', '[PATCH 2/2] pci: y',
                  good[2].replace('I' + '0' * 40, 'I' + '1' * 40))
        self.assertEqual([], problems([good, second], []))
        cases = {
            'stray file': ([good, second], ['notes.txt']),
            '[PATCH 2/2]': ([good, second[:1] + ('[PATCH] pci: y',)
                             + second[2:]], []),
            'expected file number 0002': (
                [good, ('0003-pci-y.patch',) + second[1:]], []),
            'title is 73': ([good, second[:1] + (
                '[PATCH 2/2] ' + 'x' * 73,) + second[2:]], []),
            'message line of 73': ([good, second[:2] + (
                'y' * 73 + '\n' + second[2],)], []),
            'exactly one Signed-off-by': ([good, second[:2] + (
                second[2].replace('Signed-off-by', 'Signed-by'),)], []),
            'exactly one Change-Id': ([good, second[:2] + (
                second[2].replace('Change-Id: I1', 'Change-Id: X1'),)], []),
            'also the one of 0001': ([good, second[:2] + (good[2],)], []),
            'Implements: on 0001-pci-x.patch, 0002-pci-y.patch': ([
                good[:2] + ('Implements: blueprint b\n' + good[2],),
                second[:2] + ('Implements: blueprint b\n' + second[2],)],
                []),
            'spelled Partial-Implements:': ([good[:2] + (
                'Partially-Implements: blueprint b\n' + good[2],), second],
                []),
        }
        for expected, (patches, others) in cases.items():
            found = problems(patches, others)
            self.assertEqual(1, len(found), (expected, found))
            self.assertIn(expected, found[0])

    def test_subdirectories(self):
        """placement/ is a series of its own, spec/ holds .rst documents,
        anything else anywhere is stray; Change-Ids are unique across the
        two series."""
        def tree(files):
            root = self.useFixture(fixtures.TempDir()).path
            for name, text in files.items():
                path = os.path.join(root, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, 'w') as f:
                    f.write(text)
            return root

        def patch(n, total, change):
            return ('From: A <a@b.example>\nSubject: [PATCH %d/%d] pci: x'
                    '\n\nBody.\n\nSigned-off-by: A <a@b.example>\n'
                    'Change-Id: I%s\n---\n' % (n, total, change * 40))

        good = {'0001-pci-x.patch': patch(1, 1, '0'), 'README.md': '',
                'placement/0001-fix-y.patch': patch(1, 1, '1'),
                'placement/README.md': '', 'spec/pci-mdev.rst': '',
                'spec/README.md': ''}
        self.assertEqual([], tree_problems(tree(good)))
        cases = {
            'stray file in patches/: notes/': {'notes/x.rst': ''},
            'stray file in patches/: spec/draft.txt': {
                'spec/draft.txt': ''},
            'stray file in patches/: placement/x.rst': {
                'placement/x.rst': ''},
            'stray file in patches/: placement/old/': {
                'placement/old/0001-a.patch': patch(1, 1, '2')},
            # numbered on its own, not after the Nova series
            'placement/0001-fix-y.patch: subject': {
                'placement/0001-fix-y.patch': patch(2, 2, '1')},
            'Change-Id I%s is also the one of 0001-pci-x.patch' % (
                '0' * 40): {'placement/0001-fix-y.patch': patch(1, 1, '0')},
        }
        for expected, extra in cases.items():
            found = tree_problems(tree(dict(good, **extra)))
            self.assertEqual(1, len(found), (expected, found))
            self.assertIn(expected, found[0])
