"""SysfsBackend on a temporary sysfs tree whose kernel is the fixture.

Host used by most tests::

    sys/class/mdev_bus/
      0000:84:00.0  nvidia-35 (2 available), nvidia-36 (1)
      mtty          mtty-1 (2), mtty-2 (1)          (virtual parent)
"""

import errno
import os

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import sysfs
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
GPU = '0000:84:00.0'


class SysfsCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(sysfs.SysfsTree())
        self.tree.add_parent(GPU, {'nvidia-35': (2, 'GRID M60-2Q'),
                                   'nvidia-36': 1})
        self.tree.add_parent('mtty', {'mtty-1': 2, 'mtty-2': 1},
                             virtual=True, device_api='vfio-ccw')
        self.backend = mdev_sysfs.SysfsBackend(self.tree.root,
                                               writer=self.tree.write)

    def snapshot(self):
        """Every path (and link target) under the tree's root."""
        found = set()
        for dirpath, dirnames, filenames in os.walk(self.tree.root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                found.add((path, os.readlink(path)
                           if os.path.islink(path) else None))
        return found


class TestTree(SysfsCase):
    """The fixture lays sysfs out like the kernel does."""

    def test_layout(self):
        self.tree.add_mdev(U1, GPU, 'nvidia-35')
        sys_dir = os.path.join(self.tree.root, 'sys')
        tdir = os.path.join(sys_dir, 'class/mdev_bus', GPU,
                            'mdev_supported_types/nvidia-35')
        with open(os.path.join(tdir, 'name')) as f:
            self.assertEqual('GRID M60-2Q\n', f.read())
        with open(os.path.join(tdir, 'available_instances')) as f:
            self.assertEqual('1\n', f.read())
        dev = os.path.join(sys_dir, 'bus/mdev/devices', U1)
        self.assertTrue(os.path.islink(dev))
        self.assertEqual(
            os.path.join(sys_dir, 'devices/pci0000:00', GPU, U1),
            os.path.realpath(dev))
        self.assertEqual(os.path.realpath(tdir),
                         os.path.realpath(os.path.join(dev, 'mdev_type')))
        self.assertEqual(os.path.realpath(dev), os.path.realpath(
            os.path.join(tdir, 'devices', U1)))
        self.assertEqual(
            os.path.join(sys_dir, 'devices/virtual/mtty/mtty'),
            os.path.realpath(os.path.join(sys_dir, 'class/mdev_bus/mtty')))


class TestSysfsBackend(SysfsCase):

    def test_create_list_remove(self):
        self.backend.create(U1.upper(), GPU.upper(), 'nvidia-35')
        self.backend.create(U2, 'mtty', 'mtty-2')
        self.assertEqual({U1: (GPU, 'nvidia-35'), U2: ('mtty', 'mtty-2')},
                         self.tree.mdevs())
        self.assertEqual(
            {U1: (U1, GPU, 'nvidia-35'), U2: (U2, 'mtty', 'mtty-2')},
            {u: tuple(i) for u, i in self.backend.list().items()})
        self.assertEqual([
            ('sys/class/mdev_bus/%s/mdev_supported_types/nvidia-35/create'
             % GPU, U1),
            ('sys/class/mdev_bus/mtty/mdev_supported_types/mtty-2/create',
             U2)], self.tree.writes)
        self.assertEqual(1, self.backend.available(GPU, 'nvidia-35'))
        self.assertEqual(0, self.backend.available('mtty', 'mtty-2'))
        self.backend.remove(U1)
        self.assertEqual(('sys/bus/mdev/devices/%s/remove' % U1, '1'),
                         self.tree.writes[-1])
        self.assertEqual({U2}, set(self.backend.list()))
        self.assertEqual(2, self.backend.available(GPU, 'nvidia-35'))

    def test_list_without_mdev_bus(self):
        backend = mdev_sysfs.SysfsBackend(self.useFixture(
            fixtures.TempDir()).path)
        self.assertEqual({}, backend.list())

    def test_list_skips_junk(self):
        self.tree.add_mdev(U1, GPU, 'nvidia-35')
        outside = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(outside, 'x', 'mdev_type'))
        self.tree.add_junk('not-a-uuid', '.')
        self.tree.add_junk(U2, 'dangling')
        self.tree.add_junk('aaaaaaaa-1b54-4048-85b3-a6a62d165c01',
                           os.path.join(outside, 'x'))
        self.assertEqual({U1}, set(self.backend.list()))

    def test_create_errors_by_errno(self):
        # (errno, message text, errno name) injected by the kernel
        table = [errno.EBUSY, errno.ENOSPC, errno.EACCES, errno.EINVAL,
                 errno.EIO]
        for err in table:
            self.tree.fail_next('create', err)
            exc = self.assertRaises(exception.MdevError, self.backend.create,
                                    U1, GPU, 'nvidia-35')
            self.assertNotIsInstance(exc, exception.MdevNotFound)
            self.assertEqual(errno.errorcode[err], exc.kwargs['errno'])
            for part in (U1, GPU, 'nvidia-35', os.strerror(err),
                         errno.errorcode[err]):
                self.assertIn(part, str(exc))
        self.assertEqual({}, self.tree.mdevs())

    def test_create_errors_of_the_kernel(self):
        self.tree.add_mdev(U1, GPU, 'nvidia-36')
        table = [
            # (uuid, parent, type, errno)
            (U1, GPU, 'nvidia-35', 'EEXIST'),         # UUID in use
            (U2, GPU, 'nvidia-36', 'EUSERS'),         # no instance left
            (U2, GPU, 'nvidia-99', 'ENOENT'),         # type not exposed
            (U2, '0000:85:00.0', 'nvidia-35', 'ENOENT'),  # no such parent
        ]
        for uuid, parent, mdev_type, name in table:
            exc = self.assertRaises(exception.MdevError, self.backend.create,
                                    uuid, parent, mdev_type)
            self.assertEqual(name, exc.kwargs['errno'], exc)
            self.assertIn(parent, str(exc))
        self.assertEqual({U1: (GPU, 'nvidia-36')}, self.tree.mdevs())

    def test_remove_errors_by_errno(self):
        self.tree.add_mdev(U1, GPU, 'nvidia-35')
        for err in (errno.EBUSY, errno.EACCES, errno.ENODEV):
            self.tree.fail_next('remove', err)
            exc = self.assertRaises(exception.MdevError, self.backend.remove,
                                    U1)
            for part in (U1, GPU, os.strerror(err), errno.errorcode[err]):
                self.assertIn(part, str(exc))
        self.assertEqual({U1}, set(self.tree.mdevs()))
        self.tree.fail_next('remove', errno.ENOENT)   # vanished meanwhile
        self.assertRaises(exception.MdevNotFound, self.backend.remove, U1)

    def test_remove_of_a_held_mdev_is_refused_not_blocked(self):
        # The real kernel (6.1, mtty, found by tools/realhost) blocks a
        # write to 'remove' while QEMU holds the mdev, then removes it
        # under the guest: the backend must refuse before writing.
        self.backend.create(U1, 'mtty', 'mtty-1')
        self.backend.create(U2, 'mtty', 'mtty-1')
        self.assertEqual([], self.backend.holders(U1))
        self.tree.hold(U1, pid=777)
        self.assertEqual([777], self.backend.holders(U1))
        self.assertEqual([], self.backend.holders(U2))
        writes = len(self.tree.writes)
        exc = self.assertRaises(exception.MdevError, self.backend.remove, U1)
        self.assertEqual('EBUSY', exc.kwargs['errno'])
        for part in (U1, 'mtty', '777', 'in use'):
            self.assertIn(part, str(exc))
        self.assertEqual(writes, len(self.tree.writes))
        self.assertEqual({U1, U2}, set(self.tree.mdevs()))
        self.backend.remove(U2)
        self.tree.let_go(U1)
        self.backend.remove(U1)
        self.assertEqual({}, self.tree.mdevs())

    def test_the_fixture_never_lets_a_held_mdev_go_silently(self):
        self.tree.add_mdev(U1, GPU, 'nvidia-35')
        self.tree.hold(U1)
        path = os.path.join(self.tree.root, 'sys/bus/mdev/devices', U1,
                            'remove')
        self.assertRaises(sysfs.KernelWouldBlock, self.tree.write, path, '1')
        self.assertEqual({U1}, set(self.tree.mdevs()))
        self.tree.reboot()
        self.assertEqual({}, self.tree.mdevs())

    def test_a_full_parent_fails_with_its_drivers_errno(self):
        # mtty refuses in its probe with ENOSPC; the mdev core says EUSERS
        # only for drivers without get_available.
        tree = self.useFixture(sysfs.SysfsTree())
        tree.add_parent('mtty', {'mtty-2': 1}, virtual=True,
                        full_errno=errno.ENOSPC)
        backend = mdev_sysfs.SysfsBackend(tree.root, writer=tree.write)
        backend.create(U1, 'mtty', 'mtty-2')
        exc = self.assertRaises(exception.MdevError, backend.create, U2,
                                'mtty', 'mtty-2')
        self.assertEqual('ENOSPC', exc.kwargs['errno'])
        self.assertEqual({U1}, set(tree.mdevs()))

    def test_remove_missing(self):
        exc = self.assertRaises(exception.MdevNotFound, self.backend.remove,
                                U1)
        self.assertEqual('ENOENT', exc.kwargs['errno'])
        self.assertEqual([], self.tree.writes)

    def test_available_errors(self):
        self.assertEqual(2, self.backend.available('mtty', 'mtty-1'))
        exc = self.assertRaises(exception.MdevTypeError,
                                self.backend.available, GPU, 'nvidia-99')
        self.assertIn('nvidia-99', str(exc))
        self.assertEqual('ENOENT', exc.kwargs['errno'])
        path = os.path.join(self.tree.root, 'sys/class/mdev_bus', GPU,
                            'mdev_supported_types/nvidia-35',
                            'available_instances')
        for junk in ('lots\n', '-1\n'):
            with open(path, 'w') as f:
                f.write(junk)
            exc = self.assertRaises(exception.MdevTypeError,
                                    self.backend.available, GPU, 'nvidia-35')
            self.assertIn(repr(junk.strip()), str(exc))

    def test_reboot_wipes_mdevs(self):
        self.backend.create(U1, GPU, 'nvidia-35')
        self.tree.reboot()
        self.assertEqual({}, self.backend.list())
        self.assertFalse(os.path.lexists(os.path.join(
            self.tree.root, 'sys/devices/pci0000:00', GPU, U1)))
        self.assertEqual(2, self.backend.available(GPU, 'nvidia-35'))
        self.backend.create(U1, GPU, 'nvidia-35')    # same UUID again
        self.assertEqual({U1: (GPU, 'nvidia-35')}, self.tree.mdevs())


BAD_UUIDS = ['../' + U1, U1 + '/..', '..', '/', U1 + '\x00', '', U1[:-1],
             'x' * 36, None, 42]
BAD_PARENTS = ['..', '../' + GPU, GPU + '/../..', '/etc', 'mtty/../mtty',
               'mtty\x00', '.', '', ' mtty', None]
BAD_TYPES = ['..', '../nvidia-35', 'nvidia-35/../..', '/create',
             'nvidia-35\x00', '.hidden', 'a..b', '', 'x' * 129, None, 3]


class TestPathEscapes(SysfsCase):
    """No name reaches the filesystem unless it is one safe component."""

    def test_bad_names_touch_nothing(self):
        before = self.snapshot()
        calls = []
        for uuid in BAD_UUIDS:
            calls += [(self.backend.create, (uuid, GPU, 'nvidia-35')),
                      (self.backend.remove, (uuid,))]
        for parent in BAD_PARENTS:
            calls += [(self.backend.create, (U1, parent, 'nvidia-35')),
                      (self.backend.available, (parent, 'nvidia-35'))]
        for mdev_type in BAD_TYPES:
            calls += [(self.backend.create, (U1, GPU, mdev_type)),
                      (self.backend.available, (GPU, mdev_type))]
        for call, args in calls:
            self.assertRaises(exception.Invalid, call, *args)
        self.assertEqual([], self.tree.writes)
        self.assertEqual(before, self.snapshot())

    def test_parent_link_out_of_sysfs_is_refused(self):
        # A hostile mdev_bus entry pointing outside <root>/sys: even with
        # a valid name the backend writes nothing there.
        outside = self.useFixture(fixtures.TempDir()).path
        tdir = os.path.join(outside, 'mdev_supported_types', 'nvidia-35')
        os.makedirs(tdir)
        for name in ('create', 'available_instances'):
            with open(os.path.join(tdir, name), 'w') as f:
                f.write('5\n' if name != 'create' else '')
        os.symlink(outside, os.path.join(self.tree.root,
                                         'sys/class/mdev_bus/evil'))
        exc = self.assertRaises(exception.MdevError, self.backend.create,
                                U1, 'evil', 'nvidia-35')
        self.assertIn('outside', str(exc))
        self.assertRaises(exception.MdevTypeError, self.backend.available,
                          'evil', 'nvidia-35')
        with open(os.path.join(tdir, 'create')) as f:
            self.assertEqual('', f.read())
        self.assertEqual([], self.tree.writes)


class TestDefaultWriter(testtools.TestCase):
    """The real writer: plain open(2)/write(2), never creating a file."""

    def test_writes_existing_attribute(self):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'create')
        open(path, 'w').close()
        mdev_sysfs.write_attribute(path, U1)
        with open(path) as f:
            self.assertEqual(U1, f.read())
        self.assertRaises(FileNotFoundError, mdev_sysfs.write_attribute,
                          path + '-missing', U1)
        self.assertFalse(os.path.exists(path + '-missing'))

    def test_missing_attribute_is_enoent_and_not_created(self):
        tree = self.useFixture(sysfs.SysfsTree())
        tree.add_parent(GPU, {'nvidia-35': 1})
        backend = mdev_sysfs.SysfsBackend(tree.root)   # default writer
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, GPU, 'nvidia-99')
        self.assertEqual('ENOENT', exc.kwargs['errno'])
        self.assertFalse(os.path.exists(os.path.join(
            tree.root, 'sys/class/mdev_bus', GPU,
            'mdev_supported_types/nvidia-99')))
        exc = self.assertRaises(exception.MdevError, backend.create,
                                U1, '0000:85:00.0', 'nvidia-35')
        self.assertEqual('ENOENT', exc.kwargs['errno'])
