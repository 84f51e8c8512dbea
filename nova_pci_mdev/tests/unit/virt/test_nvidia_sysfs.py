"""The NVIDIA VF sysfs tree (fixture and emulated driver) and the product
code that reads and writes it.

Tree used by most tests (the bundled L40S catalogue: 48 GB)::

    sys/devices/pci0000:40/0000:41:00.0     L40S PF, virtfn0..3
    sys/devices/pci0000:40/0000:41:00.4..7  VFs, nvidia/{current_vgpu_type,
                                                creatable_vgpu_types}
    sys/bus/pci/devices/<addr> -> ../../../devices/pci0000:40/<addr>
"""

import errno
import filecmp
import json
import os
import shutil

import fixtures
import testtools

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import nvidia_sysfs as fixture
from nova_pci_mdev.virt.libvirt.emulated import nvidia as nvidia_emulated
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf
from nova_pci_mdev.virt.libvirt.nvidia import vgpu_vfs

PF = '0000:41:00.0'
Q4, Q24, Q48, A24 = 1150, 1155, 1156, 1165


class TreeCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(fixture.NvidiaSysfsTree())
        self.vfs = self.tree.add_gpu(PF, num_vfs=4)
        self.sysfs = nvidia_sysfs.NvidiaVfSysfs(self.tree.root,
                                                writer=self.tree.write)
        self.vgpus = vgpu_vfs.VgpuVfManager(self.sysfs)

    def read(self, vf, name):
        with open(os.path.join(self.tree.root, 'sys/bus/pci/devices', vf,
                               'nvidia', name)) as handle:
            return handle.read()


class TestTree(TreeCase):
    """The fixture lays sysfs out like the kernel and plays the driver."""

    def test_layout(self):
        self.assertEqual(['0000:41:00.4', '0000:41:00.5', '0000:41:00.6',
                          '0000:41:00.7'], self.vfs)
        sys_dir = os.path.join(self.tree.root, 'sys')
        link = os.path.join(sys_dir, 'bus/pci/devices', self.vfs[0])
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.join(sys_dir, 'devices/pci0000:40',
                                      self.vfs[0]), os.path.realpath(link))
        self.assertEqual(os.path.realpath(os.path.join(
            sys_dir, 'bus/pci/devices', PF)), os.path.realpath(
            os.path.join(link, 'physfn')))
        self.assertEqual(os.path.realpath(link), os.path.realpath(
            os.path.join(sys_dir, 'bus/pci/devices', PF, 'virtfn0')))
        self.assertEqual('0\n', self.read(self.vfs[0], 'current_vgpu_type'))
        text = self.read(self.vfs[0], 'creatable_vgpu_types')
        self.assertTrue(text.startswith('ID    : vGPU Name\n1145  : NVIDIA '
                                        'L40S-1B\n'), text)
        self.assertEqual(23, len(text.splitlines()) - 1)

    def test_framebuffer_and_one_size_at_a_time(self):
        self.tree.set_type(self.vfs[0], Q24)
        # 24 GB left, 24 GB types only; the holder lists nothing.
        self.assertEqual([Q24, A24], self.tree.creatable_ids(self.vfs[1]))
        self.assertEqual([], self.tree.creatable_ids(self.vfs[0]))
        self.tree.set_type(self.vfs[1], A24)    # another series, same size
        self.assertEqual([], self.tree.creatable_ids(self.vfs[2]))
        self.assertEqual('ID    : vGPU Name\n',
                         self.read(self.vfs[3], 'creatable_vgpu_types'))
        self.tree.set_type(self.vfs[0], 0)
        self.assertEqual([Q24, A24], self.tree.creatable_ids(self.vfs[2]))
        self.assertEqual({self.vfs[1]: A24}, self.tree.types())

    def test_mixed_sizes_when_the_gpu_allows_them(self):
        tree = self.useFixture(fixture.NvidiaSysfsTree())
        vfs = tree.add_gpu(PF, num_vfs=3, mixed_sizes=True)
        tree.set_type(vfs[0], Q24)
        ids = tree.creatable_ids(vfs[1])
        self.assertIn(Q4, ids)
        self.assertNotIn(Q48, ids)

    def test_driver_errors(self):
        path = self.tree.current_path(self.vfs[0])
        cases = [('1', errno.EINVAL), ('abc', errno.EINVAL),
                 ('\u0661', errno.EINVAL), ('', errno.EINVAL)]
        for text, err in cases:
            exc = self.assertRaises(OSError, self.tree.write, path, text)
            self.assertEqual(err, exc.errno, text)
        self.tree.set_type(self.vfs[0], Q4)
        exc = self.assertRaises(OSError, self.tree.write, path, str(Q24))
        self.assertEqual(errno.EBUSY, exc.errno)
        self.tree.hold(self.vfs[0])
        exc = self.assertRaises(OSError, self.tree.write, path, '0')
        self.assertEqual(errno.EBUSY, exc.errno)
        creatable = os.path.join(os.path.dirname(path),
                                 'creatable_vgpu_types')
        exc = self.assertRaises(OSError, self.tree.write, creatable, '1')
        self.assertEqual(errno.EACCES, exc.errno)
        exc = self.assertRaises(OSError, self.tree.write,
                                path + '-nope', '1')
        self.assertEqual(errno.ENOENT, exc.errno)
        exc = self.assertRaises(OSError, self.tree.write, '/etc/passwd', '1')
        self.assertEqual(errno.EACCES, exc.errno)
        self.assertEqual({self.vfs[0]: Q4}, self.tree.types())

    def test_reboot_drops_every_type(self):
        self.tree.set_type(self.vfs[0], Q4)
        self.tree.hold(self.vfs[0])
        self.tree.reboot()
        self.assertEqual({}, self.tree.types())
        self.assertIn(Q48, self.tree.creatable_ids(self.vfs[0]))

    def test_bad_catalogue_is_a_clear_error(self):
        os.unlink(os.path.join(self.tree.root, nvidia_emulated.CATALOGUE))
        exc = self.assertRaises(exception.VgpuVfError,
                                nvidia_emulated.EmulatedDriver,
                                self.tree.root)
        self.assertIn('emulation catalogue', str(exc))

    def test_hostile_catalogues_are_refused_before_any_write(self):
        # The catalogue comes with a user's test:// sidecar tree: a name
        # that reaches a path is checked like one read from sysfs.
        outside = self.useFixture(fixtures.TempDir()).path
        escape = os.path.relpath(outside, os.path.join(
            self.tree.root, 'sys', 'bus', 'pci', 'devices'))
        fb, types = fixture.l40s_catalogue()
        good = {'framebuffer_mb': fb, 'vfs': list(self.vfs), 'types': types}
        cases = [
            ({'vfs': self.vfs + [escape]}, 'vfs'),
            ({'vfs': self.vfs + ['0000:41:00.4/../../x']}, 'vfs'),
            ({'vfs': self.vfs + ['0000:41:00.4']}, 'twice'),
            ({'vfs': 'abc'}, 'vfs'),
            ({'types': [[0, 'NVIDIA L40S-0Q', 1]]}, 'type id'),
            ({'types': [[2 ** 32, 'NVIDIA L40S-1Q', 1]]}, 'type id'),
            ({'types': [['1147', 'NVIDIA L40S-1Q', 1]]}, 'type id'),
            ({'types': [[1147, 'NVIDIA L40S-1Q\n9 : x', 1]]}, 'name'),
            ({'types': [[1147, 'NVIDIA L40S-1Q \u00e9', 1]]}, 'name'),
            ({'types': [[1147, 'NVIDIA L40S-1Q', -1]]}, 'framebuffer'),
            ({'types': [[1147, 'NVIDIA L40S-1Q']]}, 'types'),
            ({'framebuffer_mb': True}, 'framebuffer'),
            ({'framebuffer_mb': 10 ** 30}, 'framebuffer'),
        ]
        for change, word in cases:
            gpus = {PF: dict(good, **change)}
            path = os.path.join(self.tree.root, nvidia_emulated.CATALOGUE)
            with open(path, 'w') as handle:
                json.dump({'gpus': gpus}, handle)
            exc = self.assertRaises(exception.VgpuVfError,
                                    nvidia_emulated.EmulatedDriver,
                                    self.tree.root)
            self.assertIn(word, str(exc), change)
            self.assertIn(nvidia_emulated.CATALOGUE, str(exc))
        with open(path, 'w') as handle:
            json.dump({'gpus': {'../x': good}}, handle)
        exc = self.assertRaises(exception.VgpuVfError,
                                nvidia_emulated.EmulatedDriver,
                                self.tree.root)
        self.assertIn('PF', str(exc))
        self.assertEqual([], os.listdir(outside))


class TestBundledTree(testtools.TestCase):

    def test_bundled_tree_is_what_its_catalogue_gives(self):
        copy = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'tree')
        shutil.copytree(data.L40S_SYSFS, copy)
        nvidia_emulated.EmulatedDriver(copy).refresh()
        cmp = filecmp.dircmp(data.L40S_SYSFS, copy)
        self.assertEqual([], cmp.diff_files)
        driver = nvidia_emulated.EmulatedDriver(data.L40S_SYSFS)
        (gpu,) = driver.gpus.values()
        self.assertEqual(16, len(gpu['vfs']))
        self.assertEqual({}, driver.types())
        sysfs = nvidia_sysfs.NvidiaVfSysfs(data.L40S_SYSFS)
        states = sysfs.states(gpu['vfs'])
        self.assertEqual(sorted(gpu['vfs']), sorted(states))
        self.assertEqual({23}, {len(s.creatable) for s in states.values()})


class TestReading(TreeCase):

    def test_state(self):
        self.tree.set_type(self.vfs[1], Q24)
        state = self.sysfs.state(self.vfs[1].upper())
        self.assertEqual((self.vfs[1], Q24, ()),
                         (state.address, state.current, state.creatable))
        free = self.sysfs.state(self.vfs[0])
        self.assertEqual([Q24, A24], [t.id for t in free.creatable])
        self.assertEqual('NVIDIA L40S-24Q', free.creatable[0].name)

    def test_a_device_without_nvidia_directory_is_none(self):
        self.assertIsNone(self.sysfs.state(PF))
        self.assertIsNone(self.sysfs.state('0000:99:00.0'))
        self.assertEqual(self.vfs, sorted(self.sysfs.states(
            [PF, '0000:99:00.0'] + self.vfs)))

    def test_hostile_addresses_are_refused_before_any_io(self):
        for value in ('../../../etc', '0000:41:00.4/../../x', '0000:41:00.8',
                      '0000:41:20.0', 'mtty', '4b20d080-1b54-4048-85b3-'
                      'a6a62d165c01', '', None, '0000:41:00.4\n'):
            exc = self.assertRaises(exception.InvalidValue,
                                    self.sysfs.state, value)
            self.assertIn('vGPU VF address', str(exc))
            self.assertRaises(exception.InvalidValue, self.sysfs.write_type,
                              value, Q4)
        self.assertEqual([], self.tree.writes)

    def test_an_nvidia_directory_outside_sysfs_is_refused(self):
        outside = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(outside, 'x'))
        for name in ('current_vgpu_type', 'creatable_vgpu_types'):
            with open(os.path.join(outside, 'x', name), 'w') as handle:
                handle.write('0\n')
        self.tree.add_escape('0000:42:00.4', os.path.join(outside, 'x'))
        exc = self.assertRaises(exception.VgpuVfError, self.sysfs.state,
                                '0000:42:00.4')
        self.assertIn('resolves outside', str(exc))
        self.assertRaises(exception.VgpuVfError, self.sysfs.write_type,
                          '0000:42:00.4', Q4)
        self.assertEqual([], self.tree.writes)

    def test_malformed_files_name_the_path(self):
        path = self.tree.current_path(self.vfs[0])
        with open(path, 'w') as handle:
            handle.write('garbage\n')
        exc = self.assertRaises(exception.VgpuVfError, self.sysfs.state,
                                self.vfs[0])
        self.assertIn(path, str(exc))
        os.unlink(path)
        exc = self.assertRaises(exception.VgpuVfError, self.sysfs.state,
                                self.vfs[0])
        self.assertEqual('ENOENT', exc.kwargs['errno'])

    def test_write_reads_back(self):
        self.assertEqual(Q4, self.sysfs.write_type(self.vfs[0], Q4))
        self.assertEqual([('sys/bus/pci/devices/%s/nvidia/current_vgpu_type'
                           % self.vfs[0], '1150')], self.tree.writes)
        self.assertEqual(0, self.sysfs.write_type(self.vfs[0], 0))

    def test_write_errors_name_vf_value_and_errno(self):
        exc = self.assertRaises(exception.VgpuVfError, self.sysfs.write_type,
                                self.vfs[0], 999)
        self.assertEqual('EINVAL', exc.kwargs['errno'])
        self.assertIn(self.vfs[0], str(exc))
        self.assertIn('writing 999', str(exc))
        for bad in (-1, 2 ** 32, '1150', None):
            self.assertRaises(exception.InvalidValue, self.sysfs.write_type,
                              self.vfs[0], bad)


class TestManager(TreeCase):

    def test_assign_sets_every_type_before_returning(self):
        done = self.vgpus.assign([(self.vfs[0], 'nvidia-1150'),
                                  (self.vfs[1], 'nvidia-1150')])
        self.assertEqual(self.vfs[:2], done)
        self.assertEqual({self.vfs[0]: Q4, self.vfs[1]: Q4},
                         self.tree.types())

    def test_assign_leaves_a_vf_holding_the_type_alone(self):
        self.tree.set_type(self.vfs[0], Q4)
        self.assertEqual([self.vfs[1]], self.vgpus.assign(
            [(self.vfs[0], 'nvidia-1150'), (self.vfs[1], 'nvidia-1150')]))
        self.assertEqual(1, len(self.tree.writes))

    def test_capacity_used_up_by_a_sibling_rolls_everything_back(self):
        # Three 24Q do not fit in 48 GB: the third VF no longer lists it
        # once the first two hold it (re-read before each write).
        exc = self.assertRaises(
            exception.VgpuTypeNotCreatable, self.vgpus.assign,
            [(v, 'nvidia-1155') for v in self.vfs[:3]])
        self.assertIn(self.vfs[2], str(exc))
        self.assertIn('nvidia-1155', str(exc))
        self.assertIn('lists no type', str(exc))
        self.assertEqual({}, self.tree.types())

    def test_another_size_in_use_names_what_the_driver_lists(self):
        self.tree.set_type(self.vfs[3], Q24)
        exc = self.assertRaises(exception.VgpuTypeNotCreatable,
                                self.vgpus.assign,
                                [(self.vfs[0], 'nvidia-1150')])
        self.assertIn('nvidia-1155, nvidia-1165', str(exc))

    def test_never_overwrites_another_type(self):
        self.tree.set_type(self.vfs[0], Q24)
        exc = self.assertRaises(exception.VgpuVfError, self.vgpus.assign,
                                [(self.vfs[1], 'nvidia-1155'),
                                 (self.vfs[0], 'nvidia-1165')])
        self.assertEqual('EBUSY', exc.kwargs['errno'])
        self.assertEqual({self.vfs[0]: Q24}, self.tree.types())
        self.assertIn('refusing to replace it by nvidia-1165', str(exc))

    def test_a_failed_write_rolls_back_and_names_what_stays(self):
        self.tree.fail_next(errno.EIO)
        self.assertRaises(exception.VgpuVfError, self.vgpus.assign,
                          [(self.vfs[0], 'nvidia-1150')])
        self.assertEqual({}, self.tree.types())
        # vfs[1] is written, vfs[2] holds another type, and undoing vfs[1]
        # fails too (its VFIO device is open).
        self.tree.set_type(self.vfs[2], 1160)
        self.tree.hold(self.vfs[1])
        exc = self.assertRaises(exception.VgpuVfError, self.vgpus.assign,
                                [(self.vfs[1], 'nvidia-1150'),
                                 (self.vfs[2], 'nvidia-1150')])
        self.assertEqual([self.vfs[1]], exc.kwargs['left_behind'])
        self.assertIn('could not undo', str(exc))

    def test_bad_slots_are_refused_before_any_write(self):
        for slots in ([(self.vfs[0], 'nvidia-1150'), ('../x', 'nvidia-1')],
                      [(self.vfs[0], 'nvidia-1150'),
                       (self.vfs[1], 'nvidia-1150\n')],
                      [(self.vfs[0], 'nvidia-1150')] * 2,
                      [('0000:41:00.4',)], [None]):
            self.assertRaises(exception.InvalidValue, self.vgpus.assign,
                              slots)
        self.assertEqual([], self.tree.writes)

    def test_not_a_vendor_vfio_vf(self):
        exc = self.assertRaises(exception.VgpuVfError, self.vgpus.assign,
                                [('0000:99:00.1', 'nvidia-1150')])
        self.assertIn('no nvidia/ directory', str(exc))

    def test_clear_all_or_nothing(self):
        self.vgpus.assign([(v, 'nvidia-1150') for v in self.vfs[:3]])
        self.tree.hold(self.vfs[2])      # its guest still runs
        exc = self.assertRaises(exception.VgpuVfError, self.vgpus.clear,
                                self.vfs[:3])
        self.assertEqual('EBUSY', exc.kwargs['errno'])
        self.assertEqual({v: Q4 for v in self.vfs[:3]}, self.tree.types())
        self.tree.hold(self.vfs[2], False)
        self.assertEqual([(v, 'nvidia-1150') for v in self.vfs[:3]],
                         self.vgpus.clear(self.vfs[:3] + [self.vfs[3]]))
        self.assertEqual({}, self.tree.types())
        self.assertEqual([], self.vgpus.clear(self.vfs))

    def test_restore_after_reboot(self):
        self.vgpus.assign([(v, 'nvidia-1150') for v in self.vfs[:2]])
        self.tree.reboot()
        self.tree.set_type(self.vfs[1], 1160)    # someone took it: 4A
        report = self.vgpus.restore([(v, 'nvidia-1150') for v in
                                     self.vfs[:2]] + [
            ('0000:99:00.1', 'nvidia-1150')])
        self.assertEqual([self.vfs[0]], report.restored)
        self.assertEqual([self.vfs[1], '0000:99:00.1'],
                         sorted(report.failed))
        self.assertIn("holds vGPU type nvidia-1160",
                      str(report.failed[self.vfs[1]]))
        self.assertEqual({self.vfs[0]: Q4, self.vfs[1]: 1160},
                         self.tree.types())
        self.assertEqual([], self.vgpus.restore(
            [(self.vfs[0], 'nvidia-1150')]).restored)

    def test_states_through_the_manager(self):
        self.assertEqual(nvidia_vf.VfState, type(
            self.vgpus.states(self.vfs)[self.vfs[0]]))
