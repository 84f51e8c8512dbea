"""The VM image: built from Debian packages, cached, rebuilt when stale.

Layers, each cached under the cache directory with a key file naming what
it was built from, so that a change rebuilds only what depends on it::

    mtty/<release>/mtty.ko      samples/vfio-mdev/mtty.c of linux-source-6.1
                                built against linux-headers-<release>
    rootfs/                     debootstrap minbase + GUEST_PACKAGES + the
                                kernel image (key: packages, release, sources)
    wheels/                     this project and its dependencies as wheels,
                                built on the host (the VM has no PyPI)
    image/realhost.img          ext4 made from rootfs/ with mtty.ko, the
                                project's venv and the guest files (key:
                                rootfs key + mtty.ko + wheels + guest files)
    image/vmlinuz, initrd.img   the kernel QEMU boots

A layer is built in a temporary place and renamed into place only when
complete; its key file is written last. Nothing is built as a side effect
of reading: :func:`build` does everything and returns the paths.
"""

import dataclasses
import glob
import hashlib
import os
import shutil

from nova_pci_mdev.tests.realhost import debian
from nova_pci_mdev.tests.realhost import guestfiles
from nova_pci_mdev.tests.realhost import steps

VENV = '/opt/nova-pci-mdev'
IMAGE_SIZE = '6G'
#: ``--series``: the patched Nova and Placement, in their own venv
SERIES_VENV = '/opt/nova-series'
NOVA_VERSION = '34.0.0'
API_PASTE = 'api-paste.ini'
#: Nova's api-paste.ini as the sdist has it, in the VM
SERIES_API_PASTE = '/etc/nova/api-paste.ini.dist'
#: sha256 of nova-34.0.0.tar.gz on PyPI (as tools/check-patches checks it)
NOVA_SDIST_SHA256 = (
    '919eef77cda4ce0cc4746a5853b5d9341ebd0ae37bc8b1939eb77d17727c00df')
#: besides the patched Nova: what the VM runs with it (SQLAlchemy as
#: tools/check-patches pins it for Nova 34.0.0 and Placement 16)
SERIES_REQUIREMENTS = ('openstack-placement==16.0.0', 'SQLAlchemy<2.1',
                       'libvirt-python',
                       # Nova's and Placement's databases are MariaDB's
                       'PyMySQL',
                       # redis needs it on the VM's Python 3.11.2 (the
                       # host's newer Python does not pull it in)
                       'async-timeout>=4.0.3')
#: ``--break-prepare``: the series' driver with the creation of a claimed
#: mdev that does not exist taken out (the run must then fail)
BREAK_PREPARE = (
    'nova/virt/libvirt/driver.py',
    """            self._create_mdev(parent, dev.mdev_type, uuid=dev.address)
            created.append(dev.address)
""",
    """            # tools/realhost --break-prepare: the mdev is not created
            pass
""")
GIT = ['git', '-c', 'user.name=realhost', '-c', 'user.email=realhost@localhost',
       '-c', 'safe.directory=*']


def default_cache():
    return os.environ.get('REALHOST_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'nova-pci-mdev', 'realhost')


@dataclasses.dataclass
class Image:
    """What :func:`build` returns."""

    release: str
    version: str
    disk: str
    kernel: str
    initrd: str
    rebuilt: list           # the layers built this time


digest = steps.digest


def tree_digest(repo):
    """Digest of the project files that go into the wheel."""
    files = [os.path.join(repo, name)
             for name in ('setup.cfg', 'setup.py', 'README.md')]
    for top, dirs, names in os.walk(os.path.join(repo, 'nova_pci_mdev')):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        files.extend(os.path.join(top, n) for n in sorted(names)
                     if not n.endswith(('.pyc', '.pyo')))
    parts = []
    for path in files:
        with open(path, 'rb') as handle:
            parts += [os.path.relpath(path, repo), handle.read()]
    return digest(*parts)


def _read_key(path):
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


def _write_key(path, key):
    with open(path + '.tmp', 'w', encoding='utf-8') as handle:
        handle.write(key + '\n')
    os.replace(path + '.tmp', path)


def mounts_under(path):
    """Mount points at or below ``path`` (from /proc/self/mounts)."""
    path = os.path.realpath(path)
    found = []
    with open('/proc/self/mounts', encoding='utf-8') as handle:
        for line in handle:
            point = line.split()[1].replace('\\040', ' ')
            if point == path or point.startswith(path.rstrip('/') + '/'):
                found.append(point)
    return found


def safe_rmtree(path):
    """Remove a build tree, refusing while anything is mounted inside it
    (a bind-mounted /dev or /proc must never be deleted through it)."""
    if not os.path.lexists(path):
        return
    busy = mounts_under(path)
    if busy:
        raise steps.StepFailed('clean up', 'refusing to delete %s: still '
                               'mounted: %s' % (path, ', '.join(busy)))
    shutil.rmtree(path)


class Chroot:
    """``with Chroot(log, root):`` mounts /proc in ``root`` and always
    unmounts it; :meth:`run` runs a command inside."""

    def __init__(self, log, root):
        self.log = log
        self.root = root

    def __enter__(self):
        steps.run(self.log, 'mount /proc in the root file system',
                  ['mount', '-t', 'proc', 'proc',
                   os.path.join(self.root, 'proc')])
        return self

    def __exit__(self, *exc):
        steps.run(self.log, 'unmount /proc of the root file system',
                  ['umount', '-l', os.path.join(self.root, 'proc')],
                  check=False)
        return False

    def run(self, step, argv, timeout=3600):
        env = {'DEBIAN_FRONTEND': 'noninteractive', 'LC_ALL': 'C.UTF-8',
               'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'HOME': '/root'}
        return steps.run(self.log, step, ['chroot', self.root] + argv,
                         env=env, timeout=timeout)


# -- host packages and versions -------------------------------------------

def _apt_lines(log, step, argv):
    return steps.run(log, step, argv).stdout


def kernel_versions(log):
    """(release, package version) of Debian's current amd64 kernel."""
    release = debian.kernel_release(_apt_lines(
        log, 'find the kernel release',
        ['apt-cache', 'depends', 'linux-image-amd64']))
    version = debian.candidate(_apt_lines(
        log, 'find the kernel version',
        ['apt-cache', 'policy', 'linux-image-%s-unsigned' % release]))
    if version is None:
        raise steps.StepFailed('find the kernel version',
                               'apt has no linux-image-%s-unsigned'
                               % release)
    return release, version


def _missing(log, packages):
    proc = steps.run(log, 'check host packages',
                     ['dpkg-query', '-W', '-f=${Package} ${Status}\n']
                     + list(packages), check=False)
    installed = {line.split()[0] for line in proc.stdout.splitlines()
                 if line.endswith(' installed')}
    return [p for p in packages if p not in installed]


APT_INSTALL = ['apt-get', 'install', '-y', '-q', '--no-install-recommends',
               '-o', 'DPkg::Lock::Timeout=900']


def ensure_host(log):
    """Install the host packages that are missing; return the kernel
    (release, version) the image is built for."""
    steps.run(log, 'apt-get update', ['apt-get', 'update', '-q',
                                      '-o', 'DPkg::Lock::Timeout=900'],
              timeout=1800)
    release, version = kernel_versions(log)
    missing = _missing(log, debian.host_packages(release))
    if missing:
        log.note('installing host packages: %s' % ' '.join(missing))
        steps.run(log, 'install host packages', APT_INSTALL + missing,
                  env={'DEBIAN_FRONTEND': 'noninteractive'}, timeout=3600)
    source = debian.candidate(_apt_lines(
        log, 'check linux-source', ['apt-cache', 'policy',
                                    debian.LINUX_SOURCE]))
    if source != version:
        log.note('warning: %s is %s, the kernel is %s; mtty.c may differ '
                 'from the running kernel\'s'
                 % (debian.LINUX_SOURCE, source, version))
    return release, version


# -- mtty.ko ---------------------------------------------------------------

def build_mtty(log, cache, release):
    """Build mtty.ko for ``release``; return its path (cached)."""
    tarball = '/usr/src/%s.tar.xz' % debian.LINUX_SOURCE
    headers = '/usr/src/linux-headers-%s' % release
    out = os.path.join(cache, 'mtty', release)
    key = digest(release, str(os.stat(tarball).st_mtime_ns))
    ko = os.path.join(out, 'mtty.ko')
    if _read_key(os.path.join(out, 'key')) == key and os.path.exists(ko):
        return ko, False
    log.note('building mtty.ko for %s from %s' % (release, tarball))
    work = out + '.tmp'
    safe_rmtree(work)
    os.makedirs(work)
    steps.run(log, 'extract mtty.c from %s' % tarball,
              ['tar', '-xJf', tarball, '-C', work, '--strip-components=3',
               '%s/samples/vfio-mdev/mtty.c' % debian.LINUX_SOURCE])
    with open(os.path.join(work, 'Kbuild'), 'w') as handle:
        handle.write('obj-m := mtty.o\n')
    steps.run(log, 'build mtty.ko', ['make', '-C', headers, 'M=' + work,
                                     'modules'])
    vermagic = steps.run(log, 'check mtty.ko', [
        'modinfo', '-F', 'vermagic', os.path.join(work, 'mtty.ko')]).stdout
    if vermagic.split()[:1] != [release]:
        raise steps.StepFailed('check mtty.ko', 'vermagic %r does not name '
                               'kernel %s' % (vermagic.strip(), release))
    safe_rmtree(out)
    os.replace(work, out)
    _write_key(os.path.join(out, 'key'), key)
    return ko, True


# -- root file system ------------------------------------------------------

def _host_sources():
    files = []
    for path in ['/etc/apt/sources.list'] + sorted(
            glob.glob('/etc/apt/sources.list.d/*.list')
            + glob.glob('/etc/apt/sources.list.d/*.sources')):
        if os.path.exists(path):
            with open(path, encoding='utf-8') as handle:
                files.append((path, handle.read()))
    return files


def _write(root, path, text, mode=0o644):
    full = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w', encoding='utf-8') as handle:
        handle.write(text)
    os.chmod(full, mode)


def build_rootfs(log, cache, release, version):
    """debootstrap + packages + kernel in ``<cache>/rootfs`` (cached)."""
    mirror, lines = debian.debian_sources(_host_sources())
    packages = debian.guest_packages(release)
    key = digest(debian.SUITE, mirror, version, *lines, *packages,
                 *debian.INITRAMFS_MODULES, *debian.PRUNED_MODULE_DIRS)
    root = os.path.join(cache, 'rootfs')
    if _read_key(root + '.key') == key and os.path.isdir(root):
        return root, key, False
    work = root + '.tmp'
    safe_rmtree(work)
    log.note('debootstrap %s (minbase) from %s' % (debian.SUITE, mirror))
    steps.run(log, 'debootstrap', ['debootstrap', '--variant=minbase',
                                   debian.SUITE, work, mirror], timeout=3600)
    _write(work, '/etc/apt/sources.list', '\n'.join(lines) + '\n')
    shutil.copy('/etc/resolv.conf', os.path.join(work, 'etc/resolv.conf'))
    # No service may start inside the chroot while packages install.
    _write(work, '/usr/sbin/policy-rc.d', '#!/bin/sh\nexit 101\n', 0o755)
    _write(work, '/etc/initramfs-tools/conf.d/realhost',
           'MODULES=list\nBUSYBOX=y\n')
    _write(work, '/etc/initramfs-tools/modules',
           '\n'.join(debian.INITRAMFS_MODULES) + '\n')
    with Chroot(log, work) as chroot:
        chroot.run('apt-get update in the VM', ['apt-get', 'update', '-q'])
        log.note('installing %d packages in the VM' % len(packages))
        chroot.run('install the VM\'s packages',
                   ['apt-get', 'install', '-y', '-q',
                    '--no-install-recommends',
                    '-o', 'Dpkg::Options::=--force-confdef',
                    '-o', 'Dpkg::Options::=--force-confold']
                   + list(packages))
        chroot.run('clean apt', ['apt-get', 'clean'])
    os.unlink(os.path.join(work, 'usr/sbin/policy-rc.d'))
    modules = os.path.join(work, 'lib/modules', release)
    for sub in debian.PRUNED_MODULE_DIRS:
        safe_rmtree(os.path.join(modules, sub))
    safe_rmtree(root)
    os.replace(work, root)
    _write_key(root + '.key', key)
    return root, key, True


# -- wheels ----------------------------------------------------------------

def _wheel_venv(log, cache):
    """The virtualenv both wheel builds use, created if missing."""
    venv = os.path.join(cache, 'buildvenv')
    if not os.path.exists(os.path.join(venv, 'bin', 'pip')):
        safe_rmtree(venv)
        steps.run(log, 'create the wheel-building venv',
                  ['python3', '-m', 'venv', venv])
    return venv


def build_wheels(log, cache, repo):
    """Wheels of the project and its dependencies (cached by tree digest);
    return (directory, key, rebuilt)."""
    key = tree_digest(repo)
    out = os.path.join(cache, 'wheels')
    if _read_key(out + '.key') == key and os.path.isdir(out):
        return out, key, False
    venv = _wheel_venv(log, cache)
    log.note('building wheels of the project and its dependencies')
    work = out + '.tmp'
    safe_rmtree(work)
    steps.run(log, 'build wheels (pip wheel)',
              [os.path.join(venv, 'bin', 'pip'), 'wheel', '-q',
               '--disable-pip-version-check', '--wheel-dir', work, repo],
              timeout=3600)
    safe_rmtree(out)
    os.replace(work, out)
    _write_key(out + '.key', key)
    return out, key, True


# -- the patched Nova --------------------------------------------------------

def nova_sdist(log, cache):
    """The Nova 34.0.0 sdist: tools/check-patches' cached copy, else
    ``pip download`` into the cache; its sha256 is checked."""
    xdg = os.environ.get('XDG_CACHE_HOME',
                         os.path.join(os.path.expanduser('~'), '.cache'))
    name = 'nova-%s.tar.gz' % NOVA_VERSION
    for path in (os.path.join(xdg, 'nova-pci-mdev', 'check-patches', name),
                 os.path.join(cache, 'sdist', name)):
        if os.path.exists(path):
            break
    else:
        os.makedirs(os.path.join(cache, 'sdist'), exist_ok=True)
        steps.run(log, 'download the Nova %s sdist' % NOVA_VERSION, [
            os.path.join(cache, 'buildvenv', 'bin', 'pip'), 'download', '-q',
            '--no-deps', '--no-binary', ':all:', '-d',
            os.path.join(cache, 'sdist'), 'nova==%s' % NOVA_VERSION],
            timeout=1800)
    with open(path, 'rb') as handle:
        found = hashlib.sha256(handle.read()).hexdigest()
    if found != NOVA_SDIST_SHA256:
        raise steps.StepFailed('check the Nova sdist', '%s has sha256 %s, '
                               'expected %s' % (path, found,
                                                NOVA_SDIST_SHA256))
    return path


def series_patches(repo):
    return sorted(glob.glob(os.path.join(repo, 'patches', '[0-9]*.patch')))


def build_series_wheels(log, cache, repo, break_prepare=False):
    """Wheels of Nova 34.0.0 with ``patches/`` applied (``git am``), of
    Placement and of their dependencies (cached by the patches' digest);
    return (directory, key, rebuilt)."""
    patches = series_patches(repo)
    parts = [NOVA_SDIST_SHA256, *SERIES_REQUIREMENTS]
    for path in patches:
        with open(path, 'rb') as handle:
            parts += [os.path.basename(path), handle.read()]
    if break_prepare:
        parts += list(BREAK_PREPARE)
    key = digest(*parts)
    out = os.path.join(cache, 'series-wheels' + (
        '-broken' if break_prepare else ''))
    if _read_key(out + '.key') == key and os.path.isdir(out):
        return out, key, False
    venv = _wheel_venv(log, cache)
    sdist = nova_sdist(log, cache)
    work = out + '.tmp'
    safe_rmtree(work)
    os.makedirs(work)
    log.note('applying %d patches to Nova %s' % (len(patches), NOVA_VERSION))
    steps.run(log, 'unpack the Nova sdist', ['tar', '-xzf', sdist, '-C',
                                             work])
    tree = os.path.join(work, 'nova-%s' % NOVA_VERSION)
    for argv in (['init', '-q'], ['add', '-A'],
                 ['commit', '-q', '-m', 'nova %s' % NOVA_VERSION]):
        steps.run(log, 'git %s in the Nova tree' % argv[0], GIT + argv,
                  cwd=tree)
    steps.run(log, 'git am patches/ onto Nova %s' % NOVA_VERSION,
              GIT + ['am', '-q'] + patches, cwd=tree)
    if break_prepare:
        path, old, new = BREAK_PREPARE
        with open(os.path.join(tree, path)) as handle:
            text = handle.read()
        if text.count(old) != 1:
            raise steps.StepFailed('break the mdev preparation', 'the '
                                   'creation of a claimed mdev is not in %s'
                                   % path)
        with open(os.path.join(tree, path), 'w') as handle:
            handle.write(text.replace(old, new))
        log.note('--break-prepare: %s no longer creates claimed mdevs'
                 % path)
    log.note('building wheels of the patched Nova and Placement')
    steps.run(log, 'build the series wheels (pip wheel)',
              [os.path.join(venv, 'bin', 'pip'), 'wheel', '-q',
               '--disable-pip-version-check', '--wheel-dir',
               os.path.join(work, 'wheels'), tree,
               *SERIES_REQUIREMENTS],
              env=dict(os.environ, PBR_VERSION=NOVA_VERSION), timeout=3600)
    # the API's paste pipeline is no part of the wheel
    shutil.copy(os.path.join(tree, 'etc', 'nova', 'api-paste.ini'),
                os.path.join(work, 'wheels', API_PASTE))
    safe_rmtree(out)
    os.replace(os.path.join(work, 'wheels'), out)
    safe_rmtree(work)
    _write_key(out + '.key', key)
    return out, key, True


def _install_series(log, root, wheels, project_wheels):
    """The series venv in the root file system: the patched Nova,
    Placement and this project (for the scenario's code)."""
    inside = '/var/tmp/realhost-series-wheels'
    target = os.path.join(root, inside.lstrip('/'))
    safe_rmtree(target)
    shutil.copytree(wheels, target)
    with open(os.path.join(wheels, API_PASTE)) as handle:
        _write(root, SERIES_API_PASTE, handle.read())
    os.unlink(os.path.join(target, API_PASTE))
    for name in os.listdir(project_wheels):
        if not os.path.exists(os.path.join(target, name)):
            shutil.copy(os.path.join(project_wheels, name), target)
    safe_rmtree(os.path.join(root, SERIES_VENV.lstrip('/')))
    pip = SERIES_VENV + '/bin/pip'
    with Chroot(log, root) as chroot:
        chroot.run('create the VM\'s series venv',
                   ['python3', '-m', 'venv', SERIES_VENV])
        chroot.run('install the patched Nova and Placement in the VM',
                   [pip, 'install', '-q', '--no-index',
                    '--disable-pip-version-check', '--find-links', inside,
                    'nova==%s' % NOVA_VERSION, 'nova_pci_mdev',
                    *SERIES_REQUIREMENTS], timeout=3600)
    safe_rmtree(target)


# -- the image -------------------------------------------------------------

def _install_guest(log, root, release, ko, wheels):
    extra = os.path.join(root, 'lib/modules', release, 'extra')
    os.makedirs(extra, exist_ok=True)
    shutil.copy(ko, os.path.join(extra, 'mtty.ko'))
    steps.run(log, 'depmod in the VM', ['depmod', '-b', root, release])
    for path, (text, mode) in guestfiles.files().items():
        _write(root, path, text, mode)
    for link, target in guestfiles.links().items():
        full = os.path.join(root, link.lstrip('/'))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(target, full)
    for path in guestfiles.REMOVED:
        full = os.path.join(root, path.lstrip('/'))
        if os.path.lexists(full):
            os.unlink(full)
    inside = '/var/tmp/realhost-wheels'
    safe_rmtree(os.path.join(root, inside.lstrip('/')))
    shutil.copytree(wheels, os.path.join(root, inside.lstrip('/')))
    project = sorted(n for n in os.listdir(wheels)
                     if n.startswith('nova_pci_mdev-'))
    if len(project) != 1:
        raise steps.StepFailed('install the project in the VM',
                               'expected one nova_pci_mdev wheel in %s, '
                               'found %s' % (wheels, project))
    pip = VENV + '/bin/pip'
    with Chroot(log, root) as chroot:
        if not os.path.exists(os.path.join(root, pip.lstrip('/'))):
            chroot.run('create the VM\'s venv', ['python3', '-m', 'venv',
                                                 VENV])
        common = [pip, 'install', '-q', '--no-index',
                  '--disable-pip-version-check', '--find-links', inside]
        chroot.run('install the project\'s dependencies in the VM',
                   common + ['%s/%s' % (inside, project[0])])
        chroot.run('install the project in the VM',
                   common + ['--force-reinstall', '--no-deps',
                             '%s/%s' % (inside, project[0])])
    safe_rmtree(os.path.join(root, inside.lstrip('/')))


def build(log, repo, cache=None, series=False, break_prepare=False):
    """Everything, from nothing or from the cache; returns an :class:`Image`.

    With ``series`` the image also has the series venv (the patched Nova
    and Placement, see :func:`build_series_wheels`); it is another image
    (``image-series/``), made from the same root file system.
    """
    cache = cache or default_cache()
    os.makedirs(cache, exist_ok=True)
    rebuilt = []
    release, version = ensure_host(log)
    ko, new = build_mtty(log, cache, release)
    rebuilt += ['mtty.ko'] if new else []
    root, root_key, new = build_rootfs(log, cache, release, version)
    rebuilt += ['rootfs'] if new else []
    wheels, wheels_key, new = build_wheels(log, cache, repo)
    rebuilt += ['wheels'] if new else []
    series_wheels = series_key = None
    if series:
        series_wheels, series_key, new = build_series_wheels(
            log, cache, repo, break_prepare)
        rebuilt += ['series wheels'] if new else []
    with open(ko, 'rb') as handle:
        ko_digest = digest(handle.read())
    key = digest(root_key, wheels_key, ko_digest, guestfiles.digest(),
                 *([series_key] if series else []))
    out = os.path.join(cache, 'image' + (
        '-series' if series else '') + ('-broken' if break_prepare else ''))
    disk = os.path.join(out, 'realhost.img')
    result = Image(release, version, disk, os.path.join(out, 'vmlinuz'),
                   os.path.join(out, 'initrd.img'), rebuilt)
    if _read_key(os.path.join(out, 'key')) == key and all(
            os.path.exists(p) for p in (disk, result.kernel, result.initrd)):
        return result
    log.note('assembling the VM image')
    _install_guest(log, root, release, ko, wheels)
    if series:
        _install_series(log, root, series_wheels, wheels)
    busy = mounts_under(root)
    if busy:
        raise steps.StepFailed('make the disk image', 'still mounted in the '
                               'root file system: %s' % ', '.join(busy))
    os.makedirs(out, exist_ok=True)
    for path in (disk + '.tmp', os.path.join(out, 'key')):
        if os.path.exists(path):
            os.unlink(path)
    steps.run(log, 'make the disk image (mkfs.ext4 -d)',
              ['mkfs.ext4', '-q', '-F', '-L', 'realhost', '-d', root,
               disk + '.tmp', IMAGE_SIZE], timeout=1800)
    os.replace(disk + '.tmp', disk)
    # the series venv stays out of the other images made from this root
    safe_rmtree(os.path.join(root, SERIES_VENV.lstrip('/')))
    shutil.copy(os.path.join(root, 'boot', 'vmlinuz-' + release),
                result.kernel)
    shutil.copy(os.path.join(root, 'boot', 'initrd.img-' + release),
                result.initrd)
    _write_key(os.path.join(out, 'key'), key)
    result.rebuilt.append('image')
    return result
