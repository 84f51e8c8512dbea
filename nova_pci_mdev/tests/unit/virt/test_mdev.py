"""Names of the lifecycle interface, error wording, and EmulatedBackend's
file: persistence across instances, seeding, capacity, corruption."""

import errno
import json
import os

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
U3 = 'a1b2c3d4-0000-4000-8000-000000000003'
GPU = '0000:84:00.0'

GOOD = [
    # (given, normalised)
    ((U1.upper(), '0000:84:00.0', 'nvidia-35'), (U1, GPU, 'nvidia-35')),
    ((U1, '0000:D8:1F.7', 'i915-GVTg_V5_4'),
     (U1, '0000:d8:1f.7', 'i915-GVTg_V5_4')),
    ((U1, 'mtty', 'mtty-1'), (U1, 'mtty', 'mtty-1')),
    ((U1, 'mdpy_fb', 'mlx5_core-local'), (U1, 'mdpy_fb', 'mlx5_core-local')),
]

BAD = [
    # (uuid, parent, type): one bad field each
    ('../' + U1, GPU, 'nvidia-35'),
    (U1 + '/', GPU, 'nvidia-35'),
    (U1 + '\x00', GPU, 'nvidia-35'),
    ('', GPU, 'nvidia-35'),
    (None, GPU, 'nvidia-35'),
    (U1, '../' + GPU, 'nvidia-35'),
    (U1, GPU + '/..', 'nvidia-35'),
    (U1, '/sys', 'nvidia-35'),
    (U1, '..', 'nvidia-35'),
    (U1, 'mtty\x00', 'mtty-1'),
    (U1, 'mtty/', 'mtty-1'),
    (U1, '', 'mtty-1'),
    (U1, GPU, '..'),
    (U1, GPU, '.'),
    (U1, GPU, '../../../../etc'),
    (U1, GPU, 'nvidia-35/../nvidia-36'),
    (U1, GPU, 'nvidia\x00-35'),
    (U1, GPU, 'a..b'),
    (U1, GPU, ''),
    (U1, GPU, 'x' * 129),
    (U1, GPU, 7),
]


class TestNames(testtools.TestCase):

    def test_good(self):
        for given, expected in GOOD:
            self.assertEqual(mdev.MdevInfo(*expected), mdev.mdev_info(*given))
            self.assertEqual(mdev.MdevInfo(*expected), mdev.as_info(given))

    def test_bad(self):
        for args in BAD:
            exc = self.assertRaises(exception.Invalid, mdev.mdev_info, *args)
            bad = [a for a in args if a not in (U1, GPU, 'nvidia-35',
                                                'mtty-1')][0]
            self.assertIn(repr(bad), str(exc))

    def test_not_a_slot(self):
        for slot in (U1, None, (U1, GPU), (U1, GPU, 't', 'x')):
            self.assertRaises(exception.Invalid, mdev.as_info, slot)


class TestOsError(testtools.TestCase):

    def test_wording(self):
        table = [(errno.EBUSY, exception.MdevError),
                 (errno.ENOSPC, exception.MdevError),
                 (errno.EACCES, exception.MdevError),
                 (errno.ENOENT, exception.MdevError)]
        for err, cls in table:
            exc = mdev.os_error(OSError(err, 'ignored'), U1, GPU, 'create')
            self.assertIs(cls, type(exc))
            self.assertEqual(
                'Mediated device %s on parent %s: create failed: %s (%s)'
                % (U1, GPU, os.strerror(err), errno.errorcode[err]),
                str(exc))
        exc = mdev.os_error(OSError(errno.ENOENT, 'x'), U1, GPU, 'remove',
                            enoent=exception.MdevNotFound)
        self.assertIsInstance(exc, exception.MdevNotFound)


class TestEmulatedBackend(testtools.TestCase):

    TOTALS = {(GPU, 'nvidia-35'): 2, ('mtty', 'mtty-1'): 1}

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'state')

    def backend(self, totals=None, initial=()):
        return mdev_emulated.EmulatedBackend(
            self.dir, self.TOTALS if totals is None else totals, initial)

    def test_persists_across_instances(self):
        first = self.backend()
        first.create(U1, GPU, 'nvidia-35')
        second = self.backend()
        self.assertEqual({U1: (U1, GPU, 'nvidia-35')}, second.list())
        self.assertEqual(1, second.available(GPU, 'nvidia-35'))
        second.create(U2, GPU, 'nvidia-35')
        # each operation re-reads the file: the first sees the second's
        self.assertEqual(0, first.available(GPU, 'nvidia-35'))
        self.assertRaises(exception.MdevError, first.create,
                          U3, GPU, 'nvidia-35')
        first.remove(U2)
        self.assertEqual({U1}, set(second.list()))

    def test_file_format_and_no_temp_files(self):
        self.backend().create(U1.upper(), 'mtty', 'mtty-1')
        with open(os.path.join(self.dir, 'mdevs.json')) as f:
            self.assertEqual(
                {'version': 1,
                 'mdevs': {U1: {'parent': 'mtty', 'mdev_type': 'mtty-1'}}},
                json.load(f))
        self.assertEqual(['mdevs.json', 'mdevs.json.lock'],
                         sorted(os.listdir(self.dir)))

    def test_initial_seeds_only_a_new_file(self):
        seeded = self.backend(initial=[(U1, GPU, 'nvidia-35')])
        self.assertEqual({U1}, set(seeded.list()))
        self.assertEqual(1, seeded.available(GPU, 'nvidia-35'))
        seeded.remove(U1)
        again = self.backend(initial=[(U1, GPU, 'nvidia-35')])
        self.assertEqual({}, again.list())

    def test_capacity_and_refusals(self):
        b = self.backend()
        b.create(U1, 'mtty', 'mtty-1')
        table = [
            # (args, errno name)
            ((U1, GPU, 'nvidia-35'), 'EEXIST'),
            ((U2, 'mtty', 'mtty-1'), 'EUSERS'),
            ((U2, GPU, 'nvidia-36'), 'ENOENT'),
            ((U2, '0000:85:00.0', 'nvidia-35'), 'ENOENT'),
        ]
        for args, name in table:
            exc = self.assertRaises(exception.MdevError, b.create, *args)
            self.assertEqual(name, exc.kwargs['errno'])
            self.assertIn(args[0], str(exc))
            self.assertIn(args[1], str(exc))
        self.assertEqual({U1}, set(b.list()))
        self.assertEqual(0, b.available('mtty', 'mtty-1'))
        exc = self.assertRaises(exception.MdevNotFound, b.remove, U2)
        self.assertIn(U2, str(exc))
        self.assertRaises(exception.MdevTypeError, b.available,
                          GPU, 'nvidia-36')

    def test_fewer_totals_than_existing_is_zero_available(self):
        self.backend(initial=[(U1, 'mtty', 'mtty-1'),
                              (U2, 'mtty', 'mtty-1')])
        self.assertEqual(0, self.backend().available('mtty', 'mtty-1'))

    def test_bad_host_types(self):
        for totals in [{('../x', 'nvidia-35'): 1}, {(GPU, '../t'): 1},
                       {(GPU, 'nvidia-35'): -1}, {(GPU, 'nvidia-35'): '2'},
                       {(GPU, 'nvidia-35'): True}, {GPU: 1}]:
            self.assertRaises(exception.Invalid, self.backend, totals)

    def test_corrupt_file(self):
        self.backend()
        path = os.path.join(self.dir, 'mdevs.json')
        docs = ['{not json',
                '[]',
                '{"version": 2, "mdevs": {}}',
                '{"version": 1, "mdevs": []}',
                '{"version": 1, "mdevs": {"%s": {"parent": "../..", '
                '"mdev_type": "t"}}}' % U1,
                '{"version": 1, "mdevs": {"../x": {"parent": "mtty", '
                '"mdev_type": "t"}}}',
                '{"version": 1, "mdevs": {"%s": {"parent": "mtty"}}}' % U1]
        for doc in docs:
            with open(path, 'w') as f:
                f.write(doc)
            exc = self.assertRaises(exception.StoreError,
                                    self.backend().list)
            self.assertIn(path, str(exc))
