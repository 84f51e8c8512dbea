"""No name reaches outside its directory.

mdev types, parent addresses and UUIDs become components of sysfs paths
(``SysfsBackend``), keys of the emulated backend's file and parts of the
node-device XML sent to libvirt. Here hostile names are thrown at every
backend and at :mod:`nova_pci_mdev.names`; the real ``write(2)`` writer is
used on a temporary root whose surroundings hold decoy ``create`` /
``remove`` files and whose inside holds symlinks pointing out. After every
example nothing outside the root has changed and no stray file exists.
"""

import hashlib
import os

import fixtures
from hypothesis import given
from hypothesis import strategies as st

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.tests.fixtures import sysfs
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import strategies as hs
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt import nodenames
from nova_pci_mdev.virt.libvirt import slots
from nova_pci_mdev.virt.libvirt.emulated import mdevs as mdev_emulated
from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend as mdev_libvirt
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs

GOOD_UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'
TRAP_UUID = '0badc0de-0000-4000-8000-000000000001'
PARENT = '0000:84:00.0'
TRAPPED_PARENT = '0000:85:00.0'

#: Valid names, including the ones whose links lead outside the root.
VALID_UUIDS = (GOOD_UUID, GOOD_UUID.upper(), TRAP_UUID)
VALID_PARENTS = (PARENT, '0000:84:00.0'.upper(), 'mtty', TRAPPED_PARENT,
                 'evil', '0000:99:00.0')
VALID_TYPES = ('nvidia-35', 'mtty-1', 'trap', 'linked', 'nvidia-36', 'a:b.c')

uuid_name = st.one_of(st.sampled_from(VALID_UUIDS), hs.hostile_text)
parent_name = st.one_of(st.sampled_from(VALID_PARENTS), hs.hostile_text)
type_name = st.one_of(st.sampled_from(VALID_TYPES), hs.hostile_text)


def _digest(path):
    if os.path.islink(path):
        return 'link:' + os.readlink(path)
    if os.path.isdir(path):
        return 'dir'
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def tree_state(top, skip=None):
    """{relative path: content digest} of everything under ``top``."""
    state = {}
    for base, dirs, files in os.walk(top):
        if skip is not None and os.path.abspath(base) == skip:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = os.path.join(base, name)
            if skip is not None and os.path.abspath(path) == skip:
                continue
            state[os.path.relpath(path, top)] = _digest(path)
    return state


class Decoys(fixtures.Fixture):
    """A temp dir with a sysfs ``root`` inside and decoys outside it::

        <tmp>/outside/create, remove, available_instances
        <tmp>/outside/types/trap/{create,available_instances}
        <tmp>/outside/mdev/{remove,mdev_type}
        <tmp>/create, <tmp>/remove, <tmp>/sys/...(a fake sys next door)
        <root>/sys/class/mdev_bus/evil -> <tmp>/outside
        <root>/sys/.../0000:85:00.0/mdev_supported_types/trap -> outside
        <root>/sys/.../0000:85:00.0/mdev_supported_types/linked/create
                                                    -> <tmp>/outside/create
        <root>/sys/bus/mdev/devices/<TRAP_UUID> -> <tmp>/outside/mdev
    """

    def _setUp(self):
        self.tmp = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        self.root = os.path.join(self.tmp, 'root')
        self.tree = self.useFixture(sysfs.SysfsTree(self.root))
        self.tree.add_parent(PARENT, {'nvidia-35': 2, 'a:b.c': 1})
        self.tree.add_parent('mtty', {'mtty-1': 2}, virtual=True)
        device = self.tree.add_parent(TRAPPED_PARENT, {'good': 1})
        outside = os.path.join(self.tmp, 'outside')
        for rel in ('create', 'remove', 'available_instances',
                    'types/trap/create', 'types/trap/available_instances',
                    'mdev/remove', 'mdev_supported_types/nvidia-35/create',
                    'mdev_supported_types/nvidia-35/available_instances'):
            self._put(os.path.join(outside, rel), 'decoy\n')
        os.makedirs(os.path.join(outside, 'mdev', 'mdev_type'))
        for rel in ('create', 'remove', 'sys/class/mdev_bus/x/create'):
            self._put(os.path.join(self.tmp, rel), 'decoy\n')
        sys_dir = os.path.join(self.root, 'sys')
        os.symlink(outside, os.path.join(sys_dir, 'class', 'mdev_bus',
                                         'evil'))
        types = os.path.join(device, 'mdev_supported_types')
        os.symlink(os.path.join(outside, 'types', 'trap'),
                   os.path.join(types, 'trap'))
        os.makedirs(os.path.join(types, 'linked'))
        os.symlink(os.path.join(outside, 'create'),
                   os.path.join(types, 'linked', 'create'))
        self._put(os.path.join(types, 'linked', 'available_instances'),
                  '1\n')
        os.symlink(os.path.join(outside, 'mdev'),
                   os.path.join(sys_dir, 'bus', 'mdev', 'devices',
                                TRAP_UUID))
        self.before = self.outside_state()

    @staticmethod
    def _put(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write(text)

    def outside_state(self):
        return tree_state(self.tmp, skip=self.root)


class NamesTest(recorder.HardeningTestCase):

    def assertSafeComponent(self, value):
        self.assertIsInstance(value, str)
        self.assertTrue(value)
        self.assertNotIn('/', value)
        self.assertNotIn('\x00', value)
        self.assertNotIn('\\', value)
        self.assertNotIn('..', value)
        self.assertNotIn(value, ('.', '..'))
        self.assertEqual(value, os.path.basename(value))
        self.assertEqual(value, value.strip())
        joined = os.path.normpath(os.path.join('/r', value))
        self.assertEqual('/r', os.path.dirname(joined))

    def test_names_are_single_safe_components(self):
        with self.record('paths', 'hostile text through names.normalize_uuid'
                         ' / normalize_address / validate_mdev_type',
                         'a single path component without "/", NUL, ".." '
                         'or whitespace, or Invalid naming the value') as row:

            @recorder.examples(400, 5000)
            @given(hs.hostile_text | st.from_regex(
                r'\A[A-Za-z0-9_.:-]{1,130}\Z'))
            def check(text):
                row.cases += 1
                for func in (names.normalize_uuid, names.normalize_address,
                             names.validate_mdev_type):
                    try:
                        value = func(text)
                    except exception.Invalid as exc:
                        self.assertIn(repr(text)[:40], str(exc))
                        continue
                    self.assertSafeComponent(value)

            check()

    def test_slot_uuids_from_hostile_nodenames(self):
        with self.record('paths', 'slot UUIDs from hostile compute node '
                         'names, parents and types (slots.slot_uuid)',
                         'always a UUID, or Invalid') as row:

            @recorder.examples(150, 2000)
            @given(hs.hostile_text, parent_name, type_name,
                   st.integers(0, 10 ** 6))
            def check(nodename, parent, mdev_type, index):
                row.cases += 1
                try:
                    value = slots.slot_uuid(nodename, parent, mdev_type,
                                            index)
                except exception.Invalid:
                    return
                self.assertTrue(names.is_uuid(value))

            check()

    def test_default_state_dir_stays_under_the_base(self):
        with self.record('paths', 'hostile --connection URIs -> default '
                         'state directory (cli.default_state_dir)',
                         'one directory under $XDG_STATE_HOME/'
                         'nova-pci-mdev') as row:
            base = self.useFixture(fixtures.TempDir()).path
            self.useFixture(fixtures.EnvironmentVariable('XDG_STATE_HOME',
                                                         base))

            @recorder.examples(150, 2000)
            @given(hs.hostile_text.map(lambda t: 'test://' + t) |
                   hs.hostile_text)
            def check(uri):
                row.cases += 1
                path = cli.default_state_dir(uri)
                self.assertEqual(os.path.join(base, 'nova-pci-mdev'),
                                 os.path.dirname(path))
                NamesTest.assertSafeComponent(self, os.path.basename(path))

            check()


class SysfsBackendPathTest(recorder.HardeningTestCase):
    """The real writer (``open(2)`` + ``write(2)``) on a decoyed root."""

    def setUp(self):
        super().setUp()
        self.decoys = self.useFixture(Decoys())
        self.backend = mdev_sysfs.SysfsBackend(self.decoys.root)

    def assertNothingOutside(self):
        self.assertEqual(self.decoys.before, self.decoys.outside_state())

    def test_hostile_names(self):
        with self.record('paths', 'hostile (uuid, parent, type) through '
                         'SysfsBackend create/remove/available with the real '
                         'write(2), decoys and outward symlinks around',
                         'Invalid or MdevError; nothing outside the root '
                         'written, no file created') as row:
            inside = tree_state(self.decoys.root)

            @recorder.examples(150, 2000)
            @given(uuid_name, parent_name, type_name)
            def check(uuid, parent, mdev_type):
                row.cases += 1
                for call in (lambda: self.backend.create(uuid, parent,
                                                         mdev_type),
                             lambda: self.backend.remove(uuid),
                             lambda: self.backend.available(parent,
                                                            mdev_type)):
                    try:
                        call()
                    except (exception.Invalid, exception.MdevError):
                        pass
                self.assertNothingOutside()
                # Writes go to existing attributes only: no new entry.
                self.assertEqual(set(inside),
                                 set(tree_state(self.decoys.root)))

            check()

    def test_outward_links_are_refused(self):
        with self.record('paths', 'valid names whose sysfs links lead '
                         'outside the root (parent, type dir, create file, '
                         'bus entry)', 'MdevError / MdevTypeError "resolves '
                         'outside"; decoys untouched; list() skips them') \
                as row:
            cases = (
                ('create via parent link',
                 lambda: self.backend.create(GOOD_UUID, 'evil', 'nvidia-35')),
                ('create via type link',
                 lambda: self.backend.create(GOOD_UUID, TRAPPED_PARENT,
                                             'trap')),
                ('create file is a link',
                 lambda: self.backend.create(GOOD_UUID, TRAPPED_PARENT,
                                             'linked')),
                ('remove via bus link',
                 lambda: self.backend.remove(TRAP_UUID)),
                ('available via parent link',
                 lambda: self.backend.available('evil', 'nvidia-35')),
                ('available via type link',
                 lambda: self.backend.available(TRAPPED_PARENT, 'trap')),
            )
            for what, call in cases:
                row.cases += 1
                exc = self.assertRaises(exception.MdevError, call)
                self.assertIn('outside', str(exc), what)
            self.assertNotIn(TRAP_UUID, self.backend.list())
            self.assertNothingOutside()

    def test_manager_refuses_hostile_slots_before_any_io(self):
        with self.record('paths', 'hostile slots through MdevManager ensure '
                         '/ recreate_vanished / remove_unassigned',
                         'Invalid before any write; nothing created') as row:
            writes = []

            def writer(path, data):
                writes.append(path)
                self.decoys.tree.write(path, data)

            manager = mdev.MdevManager(
                mdev_sysfs.SysfsBackend(self.decoys.root, writer=writer))

            @recorder.examples(100, 1000)
            @given(st.lists(st.tuples(uuid_name, parent_name, type_name),
                            min_size=1, max_size=3))
            def check(slot_list):
                row.cases += 1
                del writes[:]
                bad = False
                for slot in slot_list:
                    try:
                        mdev.as_info(slot)
                    except exception.Invalid:
                        bad = True
                if not bad:
                    return
                self.assertRaises(exception.Invalid, manager.ensure,
                                  slot_list)
                self.assertRaises(exception.Invalid,
                                  manager.recreate_vanished, slot_list)
                self.assertEqual([], writes)
                self.assertEqual({}, self.decoys.tree.mdevs())
                uuid = slot_list[0][0]
                try:
                    manager.remove_unassigned(uuid, ())
                except exception.Invalid:
                    pass
                self.assertEqual([], writes)
                self.assertNothingOutside()

            check()


class EmulatedBackendPathTest(recorder.HardeningTestCase):

    def test_hostile_names(self):
        with self.record('paths', 'hostile (uuid, parent, type) through the '
                         'emulated backend (create/remove/available, '
                         'host_types keys)', 'Invalid or MdevError; only '
                         'mdevs.json and its lock in the state dir, nothing '
                         'else written') as row:
            tmp = self.useFixture(fixtures.TempDir()).path
            state = os.path.join(tmp, 'state')
            backend = mdev_emulated.EmulatedBackend(
                state, {(PARENT, 'nvidia-35'): 2, ('mtty', 'mtty-1'): 1})
            before = tree_state(tmp, skip=os.path.abspath(state))

            @recorder.examples(150, 2000)
            @given(uuid_name, parent_name, type_name)
            def check(uuid, parent, mdev_type):
                row.cases += 1
                for call in (lambda: backend.create(uuid, parent, mdev_type),
                             lambda: backend.remove(uuid),
                             lambda: backend.available(parent, mdev_type),
                             lambda: mdev_emulated.EmulatedBackend(
                                 state, {(parent, mdev_type): 1})):
                    try:
                        call()
                    except (exception.Invalid, exception.MdevError):
                        pass
                self.assertEqual({'mdevs.json', 'mdevs.json.lock'},
                                 set(os.listdir(state)))
                self.assertEqual(before, tree_state(
                    tmp, skip=os.path.abspath(state)))
                for uuid_, info in backend.list().items():
                    self.assertEqual(info, mdev.mdev_info(*info))

            check()


class LibvirtBackendPathTest(recorder.HardeningTestCase):

    def test_hostile_names_never_reach_libvirt(self):
        with self.record('paths', 'hostile (uuid, parent, type) through the '
                         'libvirt node-device backend', 'Invalid before any '
                         'libvirt call; valid names reach libvirt as exactly '
                         'those names (no XML injection)') as row:
            fake = (fakelibvirt.FakeHost('paths', cells=1)
                    .add_mdev_parent(PARENT, numa_node=0,
                                     types={'nvidia-35': 1000, 'a:b.c': 1000})
                    .add_virtual_parent('mtty', types={'mtty-1': 1000}))
            backend = mdev_libvirt.LibvirtNodeDeviceBackend(
                fake.connect(), libvirt=fake.libvirt)

            @recorder.examples(150, 2000)
            @given(uuid_name, parent_name, type_name)
            def check(uuid, parent, mdev_type):
                row.cases += 1
                calls = sum(fake.calls[m] for m in ('nodeDeviceCreateXML',
                                                    'nodeDeviceDefineXML'))
                try:
                    info = mdev.mdev_info(uuid, parent, mdev_type)
                except exception.Invalid:
                    self.assertRaises(exception.Invalid, backend.create,
                                      uuid, parent, mdev_type)
                    self.assertEqual(calls, sum(
                        fake.calls[m] for m in ('nodeDeviceCreateXML',
                                                'nodeDeviceDefineXML')))
                    return
                xml = mdev_libvirt.mdev_device_xml(
                    info.uuid, nodenames.pci_node_name(info.parent)
                    if names.is_pci_address(info.parent) else info.parent,
                    info.mdev_type)
                back = vconfig.LibvirtConfigNodeDeviceMdev.parse_str(xml)
                self.assertEqual((info.uuid, info.mdev_type),
                                 (back.uuid, back.mdev_type))
                try:
                    backend.create(uuid, parent, mdev_type)
                except exception.MdevError:
                    return
                made = backend.list()[info.uuid]
                self.assertEqual(info, made)
                backend.remove(info.uuid)

            check()
