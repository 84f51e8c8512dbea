"""input_files: only regular files of a bounded size are read, at once."""

import os

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
