"""patches/: the form Nova's reviewers check before they read a line of code.

Every file of the directory is a ``git format-patch`` message numbered in
order, or the README; the one directory, ``spec/``, holds the nova-specs
document of the series (``.rst`` files only: see test_spec_document).
Each message's subject says ``[PATCH n/N]`` with its
own position and the length of the series, its title fits the 72 columns
of an OpenStack commit title, its message is wrapped at 72 columns (trailers
excepted), and it ends with one ``Signed-off-by:`` and one ``Change-Id:``
(``I`` and 40 hex digits) that no other patch uses.
"""

import email
import email.policy
import os
import re

import fixtures
import testtools

PATCHES = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                       'patches')
NAME = re.compile(r'^(\d{4})-[A-Za-z0-9._-]+\.patch$')
SUBJECT = re.compile(r'^\[PATCH (\d+)/(\d+)\] (\S.*)$')
CHANGE_ID = re.compile(r'^Change-Id: (I[0-9a-f]{40})$', re.M)
SIGNED_OFF = re.compile(r'^Signed-off-by: .+ <[^<>@\s]+@[^<>\s]+>$', re.M)
TRAILER = re.compile(r'^[A-Z][A-Za-z-]+: ')
WIDTH = 72
SPEC_DIR = 'spec'


def stray_files(directory=PATCHES):
    """What does not belong in patches/: anything but ``*.patch``, the
    README and the ``spec/`` directory, and in ``spec/`` anything but
    ``*.rst`` files (named ``spec/<name>``); sorted."""
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name == SPEC_DIR and os.path.isdir(path):
            out.extend(
                '%s/%s' % (SPEC_DIR, entry)
                for entry in sorted(os.listdir(path))
                if not (entry.endswith('.rst') and
                        os.path.isfile(os.path.join(path, entry))))
        elif not name.endswith('.patch') and name != 'README.md':
            out.append(name)
    return out


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


def problems(patches, others):
    """Each way the series breaks the rules above, as one sentence."""
    out = ['stray file in patches/: %s' % name for name in others]
    total = len(patches)
    seen = {}
    for index, (name, subject, message) in enumerate(patches, 1):
        out.extend(_file_problems(index, total, name, subject, message))
        for change_id in CHANGE_ID.findall(message):
            if change_id in seen:
                out.append('%s: Change-Id %s is also the one of %s'
                           % (name, change_id, seen[change_id]))
            seen.setdefault(change_id, name)
    return out


def _file_problems(index, total, name, subject, message):
    out = []
    number = NAME.match(name)
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
    for rule, trailer in ((SIGNED_OFF, 'Signed-off-by'),
                          (CHANGE_ID, 'Change-Id')):
        if len(rule.findall(message)) != 1:
            out.append('%s: needs exactly one %s: trailer' % (name, trailer))
    return out


class TestSeriesFiles(testtools.TestCase):

    def test_the_series_has_the_form_reviewers_expect(self):
        others = stray_files()
        patches = read_patches()
        self.assertGreater(len(patches), 0)
        self.assertEqual([], problems(patches, others))

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
        }
        for expected, (patches, others) in cases.items():
            found = problems(patches, others)
            self.assertEqual(1, len(found), (expected, found))
            self.assertIn(expected, found[0])

    def test_only_spec_documents_beside_the_patches(self):
        root = self.useFixture(fixtures.TempDir()).path
        for name in ('0001-pci-x.patch', 'README.md', 'notes.txt',
                     'spec/pci-mdev-support.rst', 'spec/draft.md',
                     'spec/images/tree.txt'):
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write('x\n')
        os.mkdir(os.path.join(root, 'spec', 'old.rst'))
        self.assertEqual(['notes.txt', 'spec/draft.md', 'spec/images',
                          'spec/old.rst'], stray_files(root))
        # a file named spec is no spec directory
        flat = self.useFixture(fixtures.TempDir()).path
        for name in ('0001-pci-x.patch', 'spec'):
            with open(os.path.join(flat, name), 'w') as f:
                f.write('x\n')
        self.assertEqual(['spec'], stray_files(flat))
