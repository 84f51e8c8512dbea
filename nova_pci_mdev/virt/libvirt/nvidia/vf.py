"""NVIDIA vGPUs on SR-IOV VFs (the vendor-specific VFIO framework): the model.

Pure: no I/O. Since vGPU 17 on kernels >= 6.8, NVIDIA GPUs of the Ada,
Hopper and Blackwell families have no mdevs: every SR-IOV VF of the GPU can
hold one vGPU, whose type is chosen in the VF's sysfs directory::

    /sys/bus/pci/devices/<VF>/nvidia/current_vgpu_type     "0" or a type id
    /sys/bus/pci/devices/<VF>/nvidia/creatable_vgpu_types  what it can take now
        ID    : vGPU Name
        1147  : NVIDIA L40S-1Q
        ...

and the VF is handed to the guest as a PCI hostdev (see docs/NVIDIA_VF.md
for the sources). This module parses those two files and turns the plain
PCI records of such a GPU (libvirt shows the PF and its VFs as ordinary
``type-PF`` / ``type-VF`` node devices) into vGPU records with
:func:`apply`.

The dev_type stays ``type-VF``: the device *is* an SR-IOV VF passed as a
PCI hostdev, what makes it a vGPU is its ``mdev_type`` (PciDevice 1.8),
named ``nvidia-<type id>`` as the mdev types of older NVIDIA GPUs are, so
that one alias (``"mdev_type": "nvidia-1147"``) reads the same on both.
The PF/VF parent rules, the VF's own NUMA node and ``<hostdev type='pci'>``
then apply unchanged, and Nova's ``pci_devices`` table needs no new value.

Record contract of :func:`apply` for a PF with at least one VF that has an
``nvidia/`` directory (``states``), its exposed type ``T`` chosen like an
mdev parent's (``settings.exposed_type`` over the types its VFs list as
creatable or hold):

- the PF keeps ``type-PF``; ``mdev_type`` = ``T``;
  ``extra_info['supported_mdev_types']`` (comma-separated, by id),
  ``['resource_class']`` when ``T`` has one, ``['vgpu_framework'] =
  'nvidia-vfio'`` and ``['whole'] = 'false'`` (with or without ``T``: no
  pool ever offers it, its VFs are its vGPUs);
- every such VF keeps ``type-VF`` and gets ``vgpu_framework``,
  ``vgpu_current`` (``nvidia-<id>`` or ``''``) and ``vgpu_creatable``
  (comma-separated) in ``extra_info``; it is a **slot of T** (``mdev_type``
  = ``T``, ``mdev_exposed = 'true'``) when it holds ``T`` already, or when
  it holds nothing and lists ``T`` as creatable now, within the
  ``max_instances`` limits (:func:`.slots.type_limits`: the device_spec
  key per GPU, ``[mdev_T] max_instances`` per host; VFs holding ``T``
  always count, lowest addresses first). Otherwise ``mdev_exposed =
  'false'`` and ``mdev_type`` is the type it holds (or None): like an mdev
  of a type its parent does not expose, it stays visible but is never
  handed out.
- With no exposed type (the operator enabled none of them) the records stay
  plain PCI records with the three annotations only, so that a host whose
  nova.conf does not mention vGPU types behaves as before.

Capacity is what the driver says now: a VF that no longer lists ``T``
(the GPU's framebuffer is used up, or the driver allows one profile size at
a time and another size is in use) is no slot. Callers re-read the states
after every change (:mod:`.nvidia.sysfs` does before each write).
"""

import dataclasses
import re

from nova_pci_mdev import exception
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt import slots

DevType = fields.PciDeviceType

SYSFS_DIR = 'nvidia'
CURRENT_FILE = 'current_vgpu_type'
CREATABLE_FILE = 'creatable_vgpu_types'
#: NVIDIA's vendor id: only its VFs are looked for an ``nvidia/`` directory.
VENDOR_ID = '10de'
TYPE_PREFIX = 'nvidia-'
#: vGPU type ids are unsigned 32-bit numbers (NVML's nvmlVgpuTypeId_t).
MAX_TYPE_ID = 2 ** 32 - 1
#: The longest profile name accepted from sysfs.
MAX_NAME_LEN = 128

FRAMEWORK = 'nvidia-vfio'
EXTRA_FRAMEWORK = 'vgpu_framework'
EXTRA_CURRENT = 'vgpu_current'
EXTRA_CREATABLE = 'vgpu_creatable'

_TYPE_RE = re.compile(r'nvidia-([1-9][0-9]{0,9})')
_ID_RE = re.compile(r'[0-9]{1,10}')
_LINE_RE = re.compile(r'([0-9]{1,10})\s*:\s*(\S.*?)\s*')
_HEADER_RE = re.compile(r'ID\s*:\s*vGPU Name\s*')
_NAME_RE = re.compile(r'[\x20-\x7e]+')

TYPE_RULE = ('expected nvidia-<id> with a vGPU type id from 1 to %d and no '
             'leading zero' % MAX_TYPE_ID)


@dataclasses.dataclass(frozen=True)
class VgpuType:
    """One line of ``creatable_vgpu_types``: NVIDIA's id and profile name."""

    id: int
    name: str

    @property
    def mdev_type(self):
        return type_name(self.id)


@dataclasses.dataclass(frozen=True)
class VfState:
    """What one VF's ``nvidia/`` directory says now.

    ``current`` is the type id it holds (0: none); ``creatable`` the types
    it could take now, in file order.
    """

    address: str
    current: int
    creatable: tuple = ()

    @property
    def current_type(self):
        return type_name(self.current) if self.current else None

    def can_take(self, type_id):
        return any(t.id == type_id for t in self.creatable)


# -- names and file contents -----------------------------------------------

def type_name(type_id):
    """``1147`` -> ``'nvidia-1147'`` (validated)."""
    if (not isinstance(type_id, int) or isinstance(type_id, bool)
            or not 1 <= type_id <= MAX_TYPE_ID):
        raise exception.InvalidValue(field='vGPU type id', value=type_id,
                                     rule='expected an integer from 1 to %d'
                                          % MAX_TYPE_ID)
    return TYPE_PREFIX + str(type_id)


def is_vgpu_type(mdev_type):
    """True if ``mdev_type`` is a well-formed ``nvidia-<id>`` name."""
    return isinstance(mdev_type, str) and _type_id(mdev_type) is not None


def _type_id(mdev_type):
    match = _TYPE_RE.fullmatch(mdev_type)
    if match is None:
        return None
    value = int(match.group(1))
    return value if value <= MAX_TYPE_ID else None


def type_id_of(mdev_type, what='vGPU type'):
    """``'nvidia-1147'`` -> ``1147``; anything else raises InvalidValue.

    This is the only way a number reaches ``current_vgpu_type``: the name is
    checked whole (no sign, space, newline, leading zero or overflow).
    """
    value = _type_id(mdev_type) if isinstance(mdev_type, str) else None
    if value is None:
        raise exception.InvalidValue(field=what, value=mdev_type,
                                     rule=TYPE_RULE)
    return value


def _bad_file(path, reason):
    return exception.VgpuVfError(address=path, reason=reason)


def is_profile_name(name):
    """True for a vGPU profile name as sysfs lists it: 1 to
    :data:`MAX_NAME_LEN` printable ASCII characters, no outer blanks."""
    return (isinstance(name, str) and len(name) <= MAX_NAME_LEN
            and _NAME_RE.fullmatch(name) is not None
            and name == name.strip())


def parse_current(text, path):
    """The type id in ``current_vgpu_type`` (0 for none); strict."""
    value = text.strip() if isinstance(text, str) else None
    if value is None or not _ID_RE.fullmatch(value) or (
            int(value) > MAX_TYPE_ID):
        raise _bad_file(path, '%s holds %r, expected 0 or a vGPU type id'
                        % (CURRENT_FILE, text))
    return int(value)


def parse_creatable(text, path):
    """The :class:`VgpuType` lines of ``creatable_vgpu_types``.

    The ``ID : vGPU Name`` header and blank lines are skipped; any other
    line that is not ``<id> : <printable name>`` raises naming the line.
    An id listed twice keeps its first line.
    """
    if not isinstance(text, str):
        raise _bad_file(path, 'expected text, got %r' % (text,))
    found = {}
    for number, line in enumerate(text.split('\n'), 1):
        if not line.strip() or _HEADER_RE.fullmatch(line.strip()):
            continue
        match = _LINE_RE.fullmatch(line.strip())
        name = match.group(2) if match else ''
        if (match is None or not is_profile_name(name)
                or not 1 <= int(match.group(1)) <= MAX_TYPE_ID):
            raise _bad_file(path, '%s line %d is %r, expected "<type id> : '
                            '<vGPU name>"' % (CREATABLE_FILE, number,
                                              line[:200]))
        found.setdefault(int(match.group(1)), name)
    return tuple(VgpuType(id=i, name=n) for i, n in found.items())


def format_creatable(types):
    """The text of a ``creatable_vgpu_types`` file listing ``types``."""
    lines = ['ID    : vGPU Name']
    lines.extend('%-5d : %s' % (t.id, t.name) for t in types)
    return '\n'.join(lines) + '\n'


# -- devices ---------------------------------------------------------------

def _extra(dev):
    if isinstance(dev, dict):
        return dev.get('extra_info') or {}
    return dev.extra_info if 'extra_info' in dev else {}


def is_vgpu_vf(dev):
    """True for a VF of the vendor-specific VFIO framework (a record dict
    or a PciDevice)."""
    dev_type = dev.get('dev_type') if isinstance(dev, dict) else dev.dev_type
    return (dev_type == DevType.SRIOV_VF
            and _extra(dev).get(EXTRA_FRAMEWORK) == FRAMEWORK)


def is_vgpu_slot(dev):
    """True for a vGPU VF that is a slot of its GPU's exposed type."""
    return is_vgpu_vf(dev) and extra_info.is_true(_extra(dev),
                                                  extra_info.MDEV_EXPOSED)


def guest_hostdev(dev):
    """The hostdev of a vGPU VF: ``type='pci' managed='no'`` (the VF stays
    bound to ``nvidia``, its VFIO provider); None for any other device.
    The PF of such a GPU cannot be passed through whole."""
    if is_vgpu_vf(dev):
        return vconfig.LibvirtConfigGuestHostdevPCI(address=dev.address,
                                                    managed=False)
    extra = dev.extra_info if 'extra_info' in dev else {}
    if extra.get(EXTRA_FRAMEWORK) == FRAMEWORK:
        raise exception.InvalidValue(
            field='device', value=dev.address,
            rule='the PF of an NVIDIA vGPU GPU (vendor-specific VFIO '
                 'framework) cannot be passed through whole: its VFs are '
                 'its vGPUs')
    return None


def candidate_addresses(records):
    """Addresses of the VFs whose ``nvidia/`` directory is worth reading:
    NVIDIA ``type-VF`` records with a parent."""
    return [r['address'] for r in records
            if r.get('dev_type') == DevType.SRIOV_VF
            and r.get('vendor_id') == VENDOR_ID and r.get('parent_addr')]


def apply(records, states, settings):
    """Records with the vGPU view of every GPU that has vGPU VFs.

    ``records``: device records (dicts; not modified). ``states``:
    ``{VF address: VfState}``. ``settings``: anything with
    ``exposed_type(parent_addr, supported_types)``, ``parent_limits(
    record)`` and ``per_host(mdev_type)`` (:class:`~nova_pci_mdev.conf.
    settings.Settings`). The order of the records is kept. Linear in the
    number of records plus the creatable lines. See the module docstring.
    """
    vfs_of = {}
    pfs = {}
    for record in records:
        if (record.get('dev_type') == DevType.SRIOV_VF
                and record.get('parent_addr')
                and record['address'] in states):
            vfs_of.setdefault(record['parent_addr'], []).append(record)
    for record in records:
        if record['address'] in vfs_of:
            pfs[record['address']] = record
    gpus = [_Gpu.of(pf_addr, vfs, states, settings)
            for pf_addr, vfs in sorted(vfs_of.items())]
    _limit(gpus, pfs, settings)
    changed = {}
    for gpu in gpus:
        changed.update(gpu.records())
    out = []
    for record in records:
        update = changed.get(record['address'])
        if update is None:
            out.append(record)
        elif record['address'] in vfs_of:
            out.append(_pf_record(record, update))
        else:
            out.append(update)
    return out


def _limit(gpus, pfs, settings):
    """Choose the slots of every GPU exposing a type: VFs holding it, then
    free ones, within the ``max_instances`` limits of the type
    (:func:`.slots.creatable_per_parent`, a GPU being the parent)."""
    gpus = [g for g in gpus if g.options is not None]
    parents = [(_pf_record(pfs.get(g.pf_addr) or {
        'address': g.pf_addr, 'dev_type': DevType.SRIOV_PF}, (
            g.supported, g.options)), g.options, len(g.holding), len(g.free))
        for g in gpus]
    for gpu, count in zip(gpus, slots.creatable_per_parent(parents,
                                                           settings)):
        gpu.taken = set(gpu.holding) | set(gpu.free[:count])


def _supported(vf_states):
    """Type names the GPU offers now, ordered by id."""
    ids = set()
    for state in vf_states:
        ids.update(t.id for t in state.creatable)
        if state.current:
            ids.add(state.current)
    return [type_name(i) for i in sorted(ids)]


def _annotated(record, state):
    extra = dict(record.get('extra_info') or {})
    extra[EXTRA_FRAMEWORK] = FRAMEWORK
    extra[EXTRA_CURRENT] = state.current_type or ''
    extra[EXTRA_CREATABLE] = ','.join(t.mdev_type for t in state.creatable)
    return dict(record, extra_info=extra)


def _pf_record(record, view):
    """The PF's record with its GPU's exposed type and supported types."""
    supported, options = view
    extra = dict(record.get('extra_info') or {})
    extra[EXTRA_FRAMEWORK] = FRAMEWORK
    extra[extra_info.WHOLE] = extra_info.FALSE
    extra['supported_mdev_types'] = ','.join(supported)
    new = dict(record, extra_info=extra)
    if options is not None:
        new['mdev_type'] = options.mdev_type
        if options.resource_class:
            extra['resource_class'] = options.resource_class
    return new


@dataclasses.dataclass
class _Gpu:
    """One GPU with vGPU VFs while :func:`apply` works on it."""

    pf_addr: str
    vf_records: list
    vf_states: list
    supported: list
    options: object
    holding: list
    free: list
    taken: set = dataclasses.field(default_factory=set)

    @classmethod
    def of(cls, pf_addr, vf_records, states, settings):
        vf_records = sorted(vf_records, key=lambda r: r['address'])
        vf_states = [states[r['address']] for r in vf_records]
        supported = _supported(vf_states)
        options = settings.exposed_type(pf_addr, tuple(supported))
        if options is not None and not is_vgpu_type(options.mdev_type):
            options = None   # a type of another vendor's naming: not ours
        holding, free = [], []
        if options is not None:
            type_id = type_id_of(options.mdev_type)
            holding = [s.address for s in vf_states
                       if s.current == type_id]
            free = [s.address for s in vf_states
                    if s.current == 0 and s.can_take(type_id)]
        return cls(pf_addr, vf_records, vf_states, supported, options,
                   holding, free)

    def records(self):
        """``{address: update}``: the VFs' new records and, under the PF's
        address, ``(supported types, exposed MdevTypeOptions)``."""
        out = {self.pf_addr: (self.supported, self.options)}
        for record, state in zip(self.vf_records, self.vf_states):
            new = _annotated(record, state)
            if self.options is not None:
                slot = record['address'] in self.taken
                new['mdev_type'] = self.options.mdev_type if slot else (
                    state.current_type)
                new['extra_info'][extra_info.MDEV_EXPOSED] = (
                    extra_info.flag(slot))
            out[record['address']] = new
        return out
