"""input_files: only regular files of a bounded size are read, at once."""

import os
import shutil

import fixtures
import testtools

from nova_pci_mdev import input_files


class InputFilesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def path(self, name, text=None):
        path = os.path.join(self.tmp, name)
        if text is not None:
            with open(path, 'w', encoding='utf-8') as handle:
                handle.write(text)
        return path

    def test_regular_file_is_read(self):
        path = self.path('nova.conf', '[pci]\nalias = é\n')
        self.assertIsNone(input_files.problem(path))
        self.assertEqual('[pci]\nalias = é\n', input_files.read_text(path))

    def test_missing_file_is_left_to_the_caller(self):
        path = self.path('nope')
        self.assertIsNone(input_files.problem(path))
        self.assertRaises(FileNotFoundError, input_files.read_text, path)

    def test_what_is_refused_and_how_it_is_named(self):
        fifo = self.path('fifo')
        os.mkfifo(fifo)
        huge = self.path('huge')
        with open(huge, 'wb') as handle:
            handle.truncate(input_files.MAX_BYTES + 1)
        for path, reason in (
                (fifo, 'is a FIFO, expected a regular file'),
                ('/dev/zero', 'is a character device, expected a regular '
                              'file'),
                (self.tmp, 'is a directory, expected a regular file'),
                (huge, 'is %d bytes, more than the %d read from an input file'
                       % (input_files.MAX_BYTES + 1, input_files.MAX_BYTES))):
            self.assertEqual(reason, input_files.problem(path), path)
            exc = self.assertRaises(input_files.NotAnInputFile,
                                    input_files.read_text, path)
            self.assertEqual(reason, str(exc))

    def test_symlink_to_a_fifo_is_a_fifo(self):
        fifo = self.path('fifo')
        os.mkfifo(fifo)
        link = self.path('link')
        os.symlink(fifo, link)
        self.assertIn('a FIFO', input_files.problem(link))
        self.assertRaises(input_files.NotAnInputFile,
                          input_files.read_text, link)

    def test_bad_bytes_are_a_decode_error(self):
        path = self.path('latin1')
        with open(path, 'wb') as handle:
            handle.write(b'\xff\xfe')
        self.assertRaises(UnicodeDecodeError, input_files.read_text, path)

    def test_json_depth_is_bounded(self):
        limit = input_files.MAX_DEPTH
        ok = self.path('ok.json', '[' * limit + ']' * limit)
        self.assertEqual(limit, _depth(input_files.load_json(ok)))
        for depth in (limit + 1, 100000):
            path = self.path('deep.json', '[' * depth + ']' * depth)
            exc = self.assertRaises(input_files.TooDeep,
                                    input_files.load_json, path)
            self.assertIn('%d' % limit, str(exc))
            self.assertIsInstance(exc, ValueError)
        self.assertEqual({'a': [{'b': 1}] * 50},
                         input_files.parse_json('{"a": %s}' % (
                             '[%s]' % ', '.join(['{"b": 1}'] * 50))))

    def test_no_link_followed_when_asked(self):
        target = self.path('target.json', '{}')
        link = self.path('link.json')
        os.symlink(target, link)
        self.assertEqual({}, input_files.load_json(link))
        exc = self.assertRaises(input_files.NotAnInputFile,
                                input_files.load_json, link, follow=False)
        self.assertEqual('is a symbolic link, expected a regular file',
                         str(exc))

    def test_smaller_bound_per_reader(self):
        path = self.path('attr', 'x' * 5000)
        exc = self.assertRaises(input_files.NotAnInputFile,
                                input_files.read_text, path, max_bytes=4096)
        self.assertIn('is 5000 bytes, more than the 4096', str(exc))


def _depth(value):
    return 1 + max(map(_depth, value), default=0) if isinstance(
        value, list) else 0


class CopyTreeTest(testtools.TestCase):
    """copy_tree copies directories and regular files, nothing else."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.src = os.path.join(self.tmp, 'src')
        os.makedirs(os.path.join(self.src, 'a', 'b'))
        for name, text in (('top', 'T'), ('a/b/leaf', 'L')):
            with open(os.path.join(self.src, name), 'w') as handle:
                handle.write(text)
        self.dst = os.path.join(self.tmp, 'dst')

    def copied(self):
        return sorted(os.path.relpath(os.path.join(d, f), self.dst)
                      for d, _dirs, files in os.walk(self.dst)
                      for f in files)

    def test_directories_and_regular_files_are_copied(self):
        input_files.copy_tree(self.src, self.dst)
        self.assertEqual(['a/b/leaf', 'top'], self.copied())
        with open(os.path.join(self.dst, 'a', 'b', 'leaf')) as handle:
            self.assertEqual('L', handle.read())

    def refused(self, rule, **bounds):
        exc = self.assertRaises(input_files.TreeRefused,
                                input_files.copy_tree, self.src, self.dst,
                                **bounds)
        self.assertIn(rule, exc.strerror)
        return exc

    def test_links_are_refused_wherever_they_lead(self):
        outside = os.path.join(self.tmp, 'outside')
        os.mkdir(outside)
        for name, target in (('zero', '/dev/zero'), ('etc', '../../..'),
                             ('inside', 'b/leaf')):
            link = os.path.join(self.src, 'a', name)
            os.symlink(target, link)
            exc = self.refused('is a symbolic link')
            self.assertEqual(link, exc.filename)
            os.unlink(link)
            shutil.rmtree(self.dst)

    def test_special_files_are_refused(self):
        fifo = os.path.join(self.src, 'a', 'pipe')
        os.mkfifo(fifo)
        exc = self.refused('is a FIFO; the tree may hold only directories '
                           'and regular files')
        self.assertEqual(fifo, exc.filename)

    def test_bounds(self):
        self.refused('more than 3 entries', max_entries=3)
        shutil.rmtree(self.dst)
        self.refused('more than 1 directories below the top',
                     max_depth=1)
        shutil.rmtree(self.dst)
        self.refused('brings the files of the tree to more than 1 bytes',
                     max_bytes=1)
