"""The lifecycle interface and MdevManager, run on every backend.

Each backend gets a *world* that can build the same host and play its
side (the kernel, libvirt, the JSON file)::

    0000:84:00.0  nvidia-35 x2, nvidia-36 x1
    mtty          mtty-1 x2                   (virtual parent)

and knows what exists independently of the backend (``host_view()``) and
what a host reboot does (``reboot()``: every mdev vanishes).
"""

import errno
import os

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.tests.fixtures import sysfs
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated
from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend as mdev_libvirt
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs

U1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
U2 = '0c2e1b6a-65a6-4d4c-9c1a-2f7f2b0e7d11'
U3 = 'a1b2c3d4-0000-4000-8000-000000000003'
U4 = 'a1b2c3d4-0000-4000-8000-000000000004'
GPU = '0000:84:00.0'
TYPES = {GPU: {'nvidia-35': 2, 'nvidia-36': 1}, 'mtty': {'mtty-1': 2}}


class SysfsWorld:
    def __init__(self, case, existing):
        self.tree = case.useFixture(sysfs.SysfsTree())
        for parent, types in TYPES.items():
            self.tree.add_parent(parent, types, virtual=parent == 'mtty')
        for info in existing:
            self.tree.add_mdev(*info)
        self.backend = mdev_sysfs.SysfsBackend(self.tree.root,
                                               writer=self.tree.write)

    def host_view(self):
        return self.tree.mdevs()

    def reboot(self):
        self.tree.reboot()


class EmulatedWorld:
    def __init__(self, case, existing):
        self.state_dir = case.useFixture(fixtures.TempDir()).path
        totals = {(p, t): n for p, types in TYPES.items()
                  for t, n in types.items()}
        self.backend = mdev_emulated.EmulatedBackend(self.state_dir, totals,
                                                     initial=existing)

    def host_view(self):
        # a fresh instance reads the file: the file is the host here
        other = mdev_emulated.EmulatedBackend(self.state_dir, {})
        return {u: (i.parent, i.mdev_type) for u, i in other.list().items()}

    def reboot(self):
        for uuid in self.backend.list():
            self.backend.remove(uuid)


class LibvirtWorld:
    def __init__(self, case, existing):
        self.host = fakelibvirt.FakeHost()
        for parent, types in TYPES.items():
            if parent == 'mtty':
                self.host.add_virtual_parent(parent, types)
            else:
                self.host.add_mdev_parent(parent, types=types)
        for info in existing:
            self.host.add_mdev(*info, persistent=True, autostart=True)
        self.backend = mdev_libvirt.LibvirtNodeDeviceBackend(
            self.host.connect(), libvirt=self.host.libvirt)

    def host_view(self):
        devices = self.host.devices
        return {d.uuid: (devices[d.parent].address, d.mdev_type)
                for d in devices.values() if d.kind == 'mdev' and d.active}

    def reboot(self):
        # autostart did not bring them back (parent driver loaded late)
        for dev in self.host.devices.values():
            dev.autostart = False
        self.host.reboot()


class Contract:
    """Mixed into one TestCase per backend; ``world_class`` set there."""

    world_class = None

    def world(self, existing=()):
        return self.world_class(self, [mdev.MdevInfo(*e) for e in existing])

    # -- backend interface -------------------------------------------------

    def test_backend_operations(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35')])
        b = w.backend
        self.assertEqual({U1: mdev.MdevInfo(U1, GPU, 'nvidia-35')}, b.list())
        self.assertEqual(1, b.available(GPU, 'nvidia-35'))
        b.create(U2.upper(), 'mtty', 'mtty-1')
        self.assertEqual({U1: (GPU, 'nvidia-35'), U2: ('mtty', 'mtty-1')},
                         w.host_view())
        self.assertEqual(1, b.available('mtty', 'mtty-1'))
        b.remove(U1)
        self.assertEqual({U2: ('mtty', 'mtty-1')}, w.host_view())
        self.assertEqual(2, b.available(GPU, 'nvidia-35'))
        self.assertRaises(exception.MdevNotFound, b.remove, U1)
        self.assertRaises(exception.MdevTypeError, b.available,
                          GPU, 'nvidia-99')

    def test_backend_refusals(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-36')])
        for args in [(U1, GPU, 'nvidia-35'),        # UUID in use
                     (U2, GPU, 'nvidia-36'),        # no instance left
                     (U2, GPU, 'nvidia-99')]:       # type not exposed
            exc = self.assertRaises(exception.MdevError, w.backend.create,
                                    *args)
            self.assertIn(args[0], str(exc))
            self.assertIn(GPU, str(exc))
        self.assertEqual({U1: (GPU, 'nvidia-36')}, w.host_view())

    def test_backend_validates_names(self):
        w = self.world()
        bad_places = [(GPU, '../nvidia-35'), (GPU, 'nvidia-35/..'),
                      ('../' + GPU, 'nvidia-35'), ('mtty\x00', 'mtty-1'),
                      ('/', 'mtty-1'), ('mtty', '/'), ('..', '..')]
        for parent, mdev_type in bad_places:
            self.assertRaises(exception.Invalid, w.backend.create,
                              U1, parent, mdev_type)
            self.assertRaises(exception.Invalid, w.backend.available,
                              parent, mdev_type)
        for uuid in ('../' + U1, U1 + '\x00', '/', '..', U1 + '/..'):
            self.assertRaises(exception.Invalid, w.backend.create,
                              uuid, GPU, 'nvidia-35')
            self.assertRaises(exception.Invalid, w.backend.remove, uuid)
        self.assertEqual({}, w.host_view())

    # -- manager -----------------------------------------------------------

    def test_ensure_creates_missing_only_and_is_idempotent(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35')])
        m = mdev.MdevManager(w.backend)
        slots = [(U1, GPU, 'nvidia-35'), (U2, GPU, 'nvidia-35'),
                 mdev.MdevInfo(U3, 'mtty', 'mtty-1')]
        self.assertEqual([U2, U3], m.ensure(slots))
        expected = {U1: (GPU, 'nvidia-35'), U2: (GPU, 'nvidia-35'),
                    U3: ('mtty', 'mtty-1')}
        self.assertEqual(expected, w.host_view())
        self.assertEqual([], m.ensure(slots))
        self.assertEqual(expected, w.host_view())

    def test_ensure_rolls_back_on_failure(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35')])
        m = mdev.MdevManager(w.backend)
        # nvidia-35 has one instance left: U2 fits, U3 does not
        slots = [(U4, 'mtty', 'mtty-1'), (U2, GPU, 'nvidia-35'),
                 (U3, GPU, 'nvidia-35')]
        exc = self.assertRaises(exception.MdevError, m.ensure, slots)
        self.assertIn(U3, str(exc))
        self.assertIn(GPU, str(exc))
        self.assertEqual({U1: (GPU, 'nvidia-35')}, w.host_view())
        self.assertEqual(1, w.backend.available(GPU, 'nvidia-35'))
        self.assertEqual(2, w.backend.available('mtty', 'mtty-1'))

    def test_ensure_checks_everything_before_creating(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-36')])
        m = mdev.MdevManager(w.backend)
        cases = [
            # an existing UUID with another type
            (exception.MdevError, [(U2, 'mtty', 'mtty-1'),
                                   (U1, GPU, 'nvidia-35')]),
            # a bad name late in the list
            (exception.Invalid, [(U2, 'mtty', 'mtty-1'),
                                 (U3, GPU, '../../x')]),
            # the same UUID twice
            (exception.Invalid, [(U2, 'mtty', 'mtty-1'),
                                 (U2.upper(), 'mtty', 'mtty-1')]),
            # not a slot
            (exception.Invalid, [(U2, 'mtty', 'mtty-1'), U3]),
        ]
        for error, slots in cases:
            self.assertRaises(error, m.ensure, slots)
            self.assertEqual({U1: (GPU, 'nvidia-36')}, w.host_view())

    def test_recreate_vanished_after_reboot(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35')])
        m = mdev.MdevManager(w.backend)
        m.ensure([(U2, GPU, 'nvidia-35'), (U3, 'mtty', 'mtty-1')])
        w.reboot()
        self.assertEqual({}, w.host_view())
        allocated = [(U2, GPU, 'nvidia-35'), (U3, 'mtty', 'mtty-1')]
        report = m.recreate_vanished(allocated)
        self.assertEqual([U2, U3], report.recreated)
        self.assertEqual({}, report.failed)
        self.assertEqual({U2: (GPU, 'nvidia-35'), U3: ('mtty', 'mtty-1')},
                         w.host_view())
        # nothing vanished: nothing to do
        self.assertEqual(([], {}), m.recreate_vanished(allocated))

    def test_recreate_vanished_is_best_effort(self):
        w = self.world()
        m = mdev.MdevManager(w.backend)
        m.ensure([(U4, GPU, 'nvidia-36')])
        w.reboot()
        # U1 takes the only nvidia-36 instance back first; U2 cannot fit;
        # U3 is independent and still recreated.
        report = m.recreate_vanished([(U1, GPU, 'nvidia-36'),
                                      (U2, GPU, 'nvidia-36'),
                                      (U3, 'mtty', 'mtty-1')])
        self.assertEqual([U1, U3], report.recreated)
        self.assertEqual([U2], list(report.failed))
        self.assertIsInstance(report.failed[U2], exception.MdevError)
        self.assertEqual({U1: (GPU, 'nvidia-36'), U3: ('mtty', 'mtty-1')},
                         w.host_view())

    def test_recreate_reports_uuid_on_another_parent(self):
        w = self.world(existing=[(U1, 'mtty', 'mtty-1')])
        m = mdev.MdevManager(w.backend)
        report = m.recreate_vanished([(U1, GPU, 'nvidia-35')])
        self.assertEqual([], report.recreated)
        self.assertIn('mtty', str(report.failed[U1]))
        self.assertEqual({U1: ('mtty', 'mtty-1')}, w.host_view())

    def test_remove_unassigned(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35'),
                                 (U2, GPU, 'nvidia-35')])
        m = mdev.MdevManager(w.backend)
        exc = self.assertRaises(exception.MdevError, m.remove_unassigned,
                                U1, {U1.upper()})
        self.assertIn('assigned', str(exc))
        self.assertIn(GPU, str(exc))
        self.assertTrue(m.remove_unassigned(U2, {U1}))
        self.assertFalse(m.remove_unassigned(U2, {U1}))
        self.assertEqual({U1: (GPU, 'nvidia-35')}, w.host_view())

    def test_clear_parents_removes_every_mdev_of_the_parents(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35'),
                                 (U3, GPU, 'nvidia-36'),
                                 (U4, 'mtty', 'mtty-1')])
        m = mdev.MdevManager(w.backend)
        self.assertEqual([], m.clear_parents([], [U1]))
        removed = m.clear_parents([GPU.upper()], [U4])
        self.assertEqual(sorted([U1, U3]), [i.uuid for i in removed])
        self.assertEqual({U4: ('mtty', 'mtty-1')}, w.host_view())
        self.assertEqual({}, m.restore(removed))
        self.assertEqual({U1: (GPU, 'nvidia-35'), U3: (GPU, 'nvidia-36'),
                          U4: ('mtty', 'mtty-1')}, w.host_view())

    def test_clear_parents_refuses_an_assigned_mdev_first(self):
        w = self.world(existing=[(U1, GPU, 'nvidia-35'),
                                 (U2, GPU, 'nvidia-35')])
        m = mdev.MdevManager(w.backend)
        exc = self.assertRaises(exception.MdevError, m.clear_parents,
                                [GPU], [U2.upper()])
        self.assertIn(U2, str(exc))
        self.assertIn('assigned', str(exc))
        self.assertEqual('EBUSY', exc.kwargs['errno'])
        self.assertEqual({U1: (GPU, 'nvidia-35'), U2: (GPU, 'nvidia-35')},
                         w.host_view())


class TestSysfsContract(Contract, testtools.TestCase):
    world_class = SysfsWorld


class TestEmulatedContract(Contract, testtools.TestCase):
    world_class = EmulatedWorld


class TestLibvirtContract(Contract, testtools.TestCase):
    world_class = LibvirtWorld

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())


class SecondCreateRefused(mdev.MdevBackend):
    """A sysfs backend whose kernel refuses the second create of a call
    with ``create_err`` and, from then on, one remove with ``remove_err``.
    """

    def __init__(self, world, create_err, remove_err=None):
        self.inner = world.backend
        self.tree = world.tree
        self.create_err = create_err
        self.remove_err = remove_err
        self.creates = 0

    def list(self):
        return self.inner.list()

    def create(self, uuid, parent, mdev_type):
        self.creates += 1
        if self.creates == 2:
            self.tree.fail_next('create', self.create_err)
            if self.remove_err:
                self.tree.fail_next('remove', self.remove_err)
        self.inner.create(uuid, parent, mdev_type)

    def remove(self, uuid):
        self.inner.remove(uuid)

    def available(self, parent, mdev_type):
        return self.inner.available(parent, mdev_type)


class TestRollbackFailures(testtools.TestCase):
    """Kernel errors in the middle of ensure(), and during its rollback."""

    SLOTS = [(U1, GPU, 'nvidia-35'), (U2, 'mtty', 'mtty-1'),
             (U3, 'mtty', 'mtty-1')]

    def setUp(self):
        super().setUp()
        self.w = SysfsWorld(self, [])

    def test_each_errno_rolls_back(self):
        for err in (errno.EBUSY, errno.ENOSPC, errno.EACCES, errno.ENOENT):
            m = mdev.MdevManager(SecondCreateRefused(self.w, err))
            exc = self.assertRaises(exception.MdevError, m.ensure,
                                    self.SLOTS)
            self.assertEqual(errno.errorcode[err], exc.kwargs['errno'])
            self.assertIn(os.strerror(err), str(exc))
            self.assertIn(U2, str(exc))
            self.assertEqual({}, self.w.host_view())
            self.assertEqual(2, self.w.tree.available(GPU, 'nvidia-35'))

    def test_rollback_failure_is_named(self):
        m = mdev.MdevManager(
            SecondCreateRefused(self.w, errno.ENOSPC, errno.EBUSY))
        exc = self.assertRaises(exception.MdevError, m.ensure, self.SLOTS)
        self.assertEqual([U1], exc.kwargs['left_behind'])
        self.assertEqual('ENOSPC', exc.kwargs['errno'])
        for part in (U2, 'No space left on device', 'rollback', U1,
                     'Device or resource busy'):
            self.assertIn(part, str(exc))
        self.assertEqual({U1: (GPU, 'nvidia-35')}, self.w.host_view())

    def test_non_mdev_error_also_rolls_back(self):
        inner = self.w.backend

        class Boom(SecondCreateRefused):
            def create(self, uuid, parent, mdev_type):
                if uuid == U2:
                    raise RuntimeError('bug')
                inner.create(uuid, parent, mdev_type)

        m = mdev.MdevManager(Boom(self.w, None))
        self.assertRaises(RuntimeError, m.ensure, self.SLOTS)
        self.assertEqual({}, self.w.host_view())


class TestClearParentsFailure(testtools.TestCase):
    """The kernel refuses the second removal: the first mdev comes back."""

    def test_partial_removal_is_undone(self):
        w = SysfsWorld(self, [mdev.MdevInfo(U1, GPU, 'nvidia-35'),
                              mdev.MdevInfo(U2, GPU, 'nvidia-35')])
        inner = w.backend

        class SecondRemoveRefused(SecondCreateRefused):
            removes = 0

            def remove(self, uuid):
                self.removes += 1
                if self.removes == 2:
                    w.tree.fail_next('remove', errno.EBUSY)
                inner.remove(uuid)

        m = mdev.MdevManager(SecondRemoveRefused(w, None))
        exc = self.assertRaises(exception.MdevError, m.clear_parents, [GPU],
                                [])
        self.assertIn('EBUSY', str(exc))
        self.assertEqual({U1: (GPU, 'nvidia-35'), U2: (GPU, 'nvidia-35')},
                         w.host_view())
