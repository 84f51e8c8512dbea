"""The CLI's state directory: where it is, whether it can be one, its store.

``--state-dir`` defaults to ``$XDG_STATE_HOME/nova-pci-mdev/<slug>`` with
one slug per connection URI, so hosts are kept apart by default; an
explicit directory shared by two hosts is refused by the store, whose
``owner`` (connection, compute node) is recorded on first use.

Rule for errors (issue 15): a path that cannot be a state directory by
its shape (it is a file, lies below a file, or on a kernel filesystem such
as ``/proc``) is a bad option, :class:`~nova_pci_mdev.exception.
InvalidValue` (exit 2); a directory that exists in the right place but
cannot be used (read-only, permission, disk full, I/O) is a state failure,
:class:`~nova_pci_mdev.exception.StoreError` (exit 3). Both name the path.
"""

import hashlib
import os
import re

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.store import files as store_files

STORE_FILE = 'state.db'
#: What the emulated backends keep in the directory (the mdevs, their lock,
#: the copy of an NVIDIA VF sysfs tree): their presence beside a missing
#: store means the store was lost.
EMULATED_FILES = ('mdevs.json', 'mdevs.json.lock', 'nvidia-sysfs')
SAMPLE_OWNER = 'bundled sample host'

#: Filesystems that cannot hold a state directory.
KERNEL_FILESYSTEMS = frozenset((
    'proc', 'sysfs', 'devtmpfs', 'devpts', 'cgroup', 'cgroup2', 'debugfs',
    'tracefs', 'securityfs', 'configfs', 'pstore', 'bpf', 'efivarfs',
    'fusectl', 'mqueue', 'binfmt_misc', 'autofs', 'hugetlbfs', 'nsfs'))
MOUNTINFO = '/proc/self/mountinfo'


def default_state_dir(uri):
    base = os.environ.get('XDG_STATE_HOME') or os.path.join(
        os.path.expanduser('~'), '.local', 'state')
    if uri == data.sample_connection_uri():
        slug = 'sample-host'
    else:
        slug = '%s-%s' % (re.sub(r'[^A-Za-z0-9]+', '-', uri).strip('-')[-40:],
                          hashlib.sha256(uri.encode(
                              'utf-8', 'surrogatepass')).hexdigest()[:8])
    return os.path.join(base, 'nova-pci-mdev', slug)


def _invalid(path, rule):
    return exception.InvalidValue(field='--state-dir', value=path, rule=rule)


def _mounts(mountinfo):
    """[(mount point, filesystem type)] of ``/proc/self/mountinfo``."""
    mounts = []
    try:
        lines = input_files.read_text(mountinfo,
                                      errors='replace').splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields = line.split(' ')
        if '-' not in fields or len(fields) < 5:
            continue
        after = fields[fields.index('-') + 1:]
        if after:
            point = re.sub(r'\\([0-7]{3})',
                           lambda m: chr(int(m.group(1), 8)), fields[4])
            mounts.append((point, after[0]))
    return mounts


def filesystem_of(path, mountinfo=MOUNTINFO):
    """``(mount point, type)`` of the mount holding existing ``path``, or
    None when the mount table cannot be read."""
    real = os.path.realpath(path)
    best = None
    for point, fstype in _mounts(mountinfo):
        inside = real == point or real.startswith(point.rstrip('/') + '/')
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype)
    return best


def check(path, mountinfo=MOUNTINFO):
    """Refuse a path (absolute) that cannot be a state directory of ours
    (InvalidValue, exit 2), creating nothing."""
    existing = path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        if existing == path:
            raise _invalid(path, 'is a file, not a directory')
        raise _invalid(path, 'is below %s, which is a file, not a directory'
                       % existing)
    mount = filesystem_of(existing, mountinfo)
    if mount is not None and mount[1] in KERNEL_FILESYSTEMS:
        raise _invalid(path, 'is on %s, a %s filesystem of the kernel that '
                             'cannot hold state files' % (mount[0],
                                                          mount[1]))


def prepare(path, mountinfo=MOUNTINFO):
    """Create the state directory ``path`` (absolute) if needed.

    Raises InvalidValue for a path that cannot be a directory of ours
    (:func:`check`), StoreError when the directory cannot be created.
    """
    check(path, mountinfo)
    with store_files.os_errors(path, 'create the state directory'):
        os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def owner(uri, nodename):
    """The store owner of a host: its connection and compute node."""
    name = SAMPLE_OWNER if uri == data.sample_connection_uri() else uri
    return {'connection': name, 'compute_node': nodename}
