"""An emulated NVIDIA vGPU driver: plays the kernel on a sysfs tree.

For ``test://`` hosts (libvirt's test driver knows nothing of NVIDIA's
``nvidia/`` directories) and for the tests, this module keeps a tree laid
out as :mod:`.nvidia.sysfs` reads it and reacts to writes to
``current_vgpu_type`` the way NVIDIA documents the driver does::

    <root>/nvidia_emulation.json          the catalogue (below); not sysfs
    <root>/sys/bus/pci/devices/<VF>/nvidia/
        current_vgpu_type   creatable_vgpu_types

The catalogue says, per GPU (PF address): its framebuffer in MB, its VFs
and its vGPU types as ``[id, name, framebuffer MB]``, and whether it may
mix profile sizes (``mixed_sizes``, default false). The real driver keeps
this knowledge to itself; sysfs shows only its consequence, the creatable
list of each VF, which this emulator derives as follows (an emulation
choice, see docs/NVIDIA_VF.md for what NVIDIA documents):

* a VF that holds a type lists nothing;
* a free VF lists every type whose framebuffer still fits in what the
  GPU's vGPUs leave free and, unless ``mixed_sizes``, whose framebuffer
  equals the size already in use on the GPU (one profile size at a time).

Writes: a type id the VF lists now -> it holds it and every sibling's list
is recomputed; ``0`` -> it holds nothing (``EBUSY`` while its VFIO device is
open, see :meth:`EmulatedDriver.hold`); an id it does not list -> ``EINVAL``;
a type over another -> ``EBUSY``; text that is not a number -> ``EINVAL``;
any other attribute -> ``EACCES``; a path outside ``<root>/sys`` ->
``EACCES``; an unknown path -> ``ENOENT``. :meth:`EmulatedDriver.reboot`
drops every type.
"""

import errno
import json
import os
import shutil
import tempfile

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

CATALOGUE = 'nvidia_emulation.json'
#: The most an attribute file of the tree may hold (a sysfs attribute is
#: at most a page).
ATTRIBUTE_BYTES = 4096


def _oserror(err, path):
    return OSError(err, os.strerror(err), path)


def _vf_dir(root, address):
    return os.path.join(root, 'sys', 'bus', 'pci', 'devices', address,
                        nvidia_vf.SYSFS_DIR)


def _put(path, text):
    with open(path, 'w', encoding='ascii') as handle:
        handle.write(text)


#: The largest framebuffer (MB) a catalogue may give a GPU or a type.
MAX_FRAMEBUFFER_MB = 2 ** 31


def load_catalogue(root):
    """The catalogue of the tree under ``root``, validated before any path
    is built from it (it may come with a user's ``test://`` sidecar): PF
    and VF addresses canonical, each VF on one GPU, type ids and names as
    sysfs would list them, framebuffers whole numbers of MB."""
    path = os.path.join(root, CATALOGUE)
    try:
        data = input_files.load_json(path, follow=False)
        gpus = {}
        for pf, spec in data['gpus'].items():
            gpus[_address('PF', pf)] = _gpu(pf, spec)
        seen = [vf for gpu in gpus.values() for vf in gpu['vfs']]
        if len(seen) != len(set(seen)):
            raise ValueError('a VF is listed twice')
    except (OSError, ValueError, KeyError, TypeError, AttributeError,
            exception.Invalid) as exc:
        raise exception.VgpuVfError(
            address=path, reason='unusable emulation catalogue: %s' % exc)
    return gpus


def _address(what, value):
    try:
        canonical = nvidia_sysfs.vf_address(value)
    except exception.Invalid:
        canonical = None
    if canonical != value:
        raise ValueError('%s %r is not a canonical PCI address (in vfs or '
                         'as a key of gpus: dddd:bb:ss.f, lower-case hex)'
                         % (what, value))
    return value


def _framebuffer(what, value):
    if (not isinstance(value, int) or isinstance(value, bool)
            or not 0 < value <= MAX_FRAMEBUFFER_MB):
        raise ValueError('framebuffer_mb of %s is %r, expected a whole '
                         'number of MB from 1 to %d'
                         % (what, value, MAX_FRAMEBUFFER_MB))
    return value


def _vgpu_type(row):
    if not isinstance(row, list) or len(row) != 3:
        raise ValueError('types has %r, expected [id, name, framebuffer '
                         'MB]' % (row,))
    type_id, name, size = row
    nvidia_vf.type_name(type_id)            # validates the type id
    if not nvidia_vf.is_profile_name(name):
        raise ValueError('type %d has the name %r, expected printable '
                         'ASCII as sysfs lists it' % (type_id, name))
    return (nvidia_vf.VgpuType(id=type_id, name=name),
            _framebuffer('type %d' % type_id, size))


def _gpu(pf, spec):
    if not isinstance(spec['vfs'], list):
        raise ValueError('vfs of %s is %r, expected a list' % (
            pf, spec['vfs']))
    vfs = tuple(_address('VF', vf) for vf in spec['vfs'])
    rows = [_vgpu_type(row) for row in spec['types']]
    return {'pf': pf,
            'framebuffer_mb': _framebuffer(pf, spec['framebuffer_mb']),
            'vfs': vfs, 'types': tuple(t for t, _fb in rows),
            'sizes': {t.id: fb for t, fb in rows},
            'mixed_sizes': bool(spec.get('mixed_sizes'))}


def catalogue_text(gpus):
    """The catalogue as JSON, one vGPU type a line."""
    parts = []
    for pf in sorted(gpus):
        spec = gpus[pf]
        rows = ',\n'.join('    ' + json.dumps(list(t)) for t in spec['types'])
        parts.append('  %s: {\n   "framebuffer_mb": %d,\n   "mixed_sizes": '
                     '%s,\n   "vfs": %s,\n   "types": [\n%s\n   ]}' % (
                         json.dumps(pf), spec['framebuffer_mb'],
                         json.dumps(bool(spec.get('mixed_sizes'))),
                         json.dumps(list(spec['vfs'])), rows))
    return '{"gpus": {\n%s\n}}\n' % ',\n'.join(parts)


def write_tree(root, gpus):
    """Create a tree and its catalogue under ``root``.

    ``gpus``: ``{pf: {'framebuffer_mb': n, 'vfs': [addresses], 'types':
    [[id, name, framebuffer MB], ...], 'mixed_sizes': bool}}``. Every VF
    starts without a type. Returns an :class:`EmulatedDriver` on it.
    """
    os.makedirs(root, exist_ok=True)
    _put(os.path.join(root, CATALOGUE), catalogue_text(gpus))
    for spec in gpus.values():
        for vf in spec['vfs']:
            os.makedirs(_vf_dir(root, vf), exist_ok=True)
            _put(os.path.join(_vf_dir(root, vf), nvidia_vf.CURRENT_FILE),
                 '0\n')
    driver = EmulatedDriver(root)
    driver.refresh()
    return driver


class EmulatedDriver(object):
    """The driver's reactions on the tree under ``root`` (module doc)."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.sys = os.path.realpath(os.path.join(self.root, 'sys'))
        self.gpus = load_catalogue(self.root)
        self._gpu_of = {}
        self._file_of = {}         # real path of current_vgpu_type -> VF
        for pf, gpu in self.gpus.items():
            for vf in gpu['vfs']:
                self._gpu_of[vf] = gpu
                path = os.path.join(_vf_dir(self.root, vf),
                                    nvidia_vf.CURRENT_FILE)
                self._file_of[os.path.realpath(path)] = vf
        self._held = set()

    # -- the state, as files -------------------------------------------------

    def current(self, vf):
        """The type id ``vf`` holds (0: none), from its file (a regular
        file of at most a page, as sysfs attributes are)."""
        path = os.path.join(_vf_dir(self.root, vf), nvidia_vf.CURRENT_FILE)
        try:
            text = input_files.read_text(path, encoding='ascii',
                                         max_bytes=ATTRIBUTE_BYTES,
                                         follow=False)
        except input_files.NotAnInputFile as exc:
            raise OSError(errno.EINVAL, str(exc), path) from None
        return nvidia_vf.parse_current(text, path)

    def creatable(self, vf):
        """What ``vf`` can take now (see the module docstring)."""
        gpu = self._gpu_of[vf]
        return self._creatable(gpu, self._currents(gpu), vf)

    def _currents(self, gpu):
        return {v: self.current(v) for v in gpu['vfs']}

    @staticmethod
    def _creatable(gpu, currents, vf):
        if currents[vf]:
            return ()
        used = [gpu['sizes'].get(c, 0) for c in currents.values() if c]
        left = gpu['framebuffer_mb'] - sum(used)
        return tuple(t for t in gpu['types']
                     if gpu['sizes'][t.id] <= left and (
                         gpu['mixed_sizes'] or not used
                         or gpu['sizes'][t.id] == used[0]))

    def refresh(self, gpu=None):
        """Rewrite the creatable lists (of one GPU, or of all): each VF's
        type is read once per GPU, so a write costs linear time."""
        for spec in ([gpu] if gpu is not None else self.gpus.values()):
            currents = self._currents(spec)
            for vf in spec['vfs']:
                _put(os.path.join(_vf_dir(self.root, vf),
                                  nvidia_vf.CREATABLE_FILE),
                     nvidia_vf.format_creatable(
                         self._creatable(spec, currents, vf)))

    def _set(self, vf, type_id):
        _put(os.path.join(_vf_dir(self.root, vf), nvidia_vf.CURRENT_FILE),
             '%d\n' % type_id)
        self.refresh(self._gpu_of[vf])

    # -- the kernel ----------------------------------------------------------

    def hold(self, vf, open_=True):
        """The VF's VFIO device is open (a guest runs): dropping fails."""
        (self._held.add if open_ else self._held.discard)(vf)

    def write(self, path, data):
        """``write(2)`` of ``data`` to ``path`` (see the module docstring)."""
        real = os.path.realpath(path)
        if not real.startswith(self.sys + os.sep):
            raise _oserror(errno.EACCES, path)
        if not os.path.isfile(real):
            raise _oserror(errno.ENOENT, path)
        vf = self._file_of.get(real)
        if vf is None:
            raise _oserror(errno.EACCES, path)
        text = data.strip() if isinstance(data, str) else ''
        if not text.isdigit() or not text.isascii():
            raise _oserror(errno.EINVAL, path)
        type_id, current = int(text), self.current(vf)
        if type_id == 0:
            if current and vf in self._held:
                raise _oserror(errno.EBUSY, path)
            self._set(vf, 0)
        elif current:
            raise _oserror(errno.EBUSY, path)
        elif not any(t.id == type_id for t in self.creatable(vf)):
            raise _oserror(errno.EINVAL, path)
        else:
            self._set(vf, type_id)

    def reboot(self):
        """Every VF loses its type (and its guest)."""
        self._held.clear()
        for gpu in self.gpus.values():
            for vf in gpu['vfs']:
                _put(os.path.join(_vf_dir(self.root, vf),
                                  nvidia_vf.CURRENT_FILE), '0\n')
        self.refresh()

    def types(self):
        """``{vf: type id}`` of every VF that holds a type."""
        return {vf: self.current(vf) for vf in sorted(self._gpu_of)
                if self.current(vf)}


def seeded_sysfs(source, state_dir):
    """An :class:`~.nvidia.sysfs.NvidiaVfSysfs` on this state directory's
    copy of the tree ``source``, with this emulated driver as its writer.

    The copy (``<state_dir>/nvidia-sysfs``) is made once, atomically; it is
    then the host's truth (the vGPU types claims wrote), as the emulated
    mdevs of a ``test://`` host are. Only directories and regular files are
    copied, within :func:`~nova_pci_mdev.input_files.copy_tree`'s bounds:
    a link (to ``/dev/zero``, to ``../../etc``), a FIFO or a device in the
    tree is refused (VgpuVfError naming it), nothing outside it is read.
    """
    root = os.path.join(state_dir, 'nvidia-sysfs')
    if not os.path.isdir(root):
        scratch = tempfile.mkdtemp(prefix='.nvidia-sysfs-', dir=state_dir)
        try:
            input_files.copy_tree(source, os.path.join(scratch, 'tree'))
            os.rename(os.path.join(scratch, 'tree'), root)
        except input_files.TreeRefused as exc:
            raise exception.VgpuVfError(
                address=source, reason='the sysfs tree of the sidecar is '
                'not copied: %s %s' % (exc.filename, exc.strerror)) from None
        except OSError as exc:
            if not os.path.isdir(root):
                raise exception.VgpuVfError(
                    address=source, reason='cannot copy the sysfs tree to '
                    '%s: %s' % (root, exc))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return nvidia_sysfs.NvidiaVfSysfs(root, writer=EmulatedDriver(root).write)
