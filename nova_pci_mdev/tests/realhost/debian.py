"""What the image is made of: Debian package names, apt sources, versions.

Pure functions over text (apt's outputs, sources files), so that the parts
that decide what gets installed are tested without a network.
"""

import re

#: The Debian release the image and the host tools come from.
SUITE = 'bookworm'
#: Where the mtty sample source comes from (its tarball in /usr/src).
LINUX_SOURCE = 'linux-source-6.1'
#: Host packages the tool needs besides the kernel headers of the release.
HOST_PACKAGES = (
    'qemu-system-x86', 'qemu-utils', 'debootstrap', LINUX_SOURCE, 'make',
    'gcc', 'xz-utils', 'e2fsprogs', 'kmod', 'python3-venv', 'python3-dev',
    'libvirt-dev', 'pkg-config',
)
#: Packages of the VM's root file system on top of debootstrap's minbase
#: (installed without recommends), besides the kernel image.
GUEST_PACKAGES = (
    'systemd-sysv', 'udev', 'kmod', 'procps', 'python3', 'python3-venv',
    'libvirt-daemon-system', 'libvirt-daemon-driver-qemu', 'libvirt-clients',
    'qemu-system-x86', 'mdevctl', 'initramfs-tools', 'busybox',
    # qemu-img: Nova's libvirt driver (tools/realhost --series) converts
    # and layers the guests' disks with it
    'qemu-utils',
    # tools/realhost --series: Nova's and Placement's databases (Nova's
    # gate runs on MySQL; several services write at once, which SQLite in
    # one process answered with "database is locked"). Not started at boot
    # (guestfiles.REMOVED): the series phases start it.
    'mariadb-server',
)
#: Modules the initramfs needs to mount the root disk (MODULES=list).
INITRAMFS_MODULES = ('virtio_pci', 'virtio_blk', 'ext4')
#: Kernel module directories the VM never loads (pruned to keep it small).
PRUNED_MODULE_DIRS = (
    'kernel/drivers/gpu', 'kernel/drivers/net/wireless', 'kernel/sound',
    'kernel/drivers/media', 'kernel/drivers/infiniband',
    'kernel/drivers/staging', 'kernel/net/wireless', 'kernel/net/mac80211',
    'kernel/drivers/bluetooth', 'kernel/net/bluetooth',
    'kernel/drivers/isdn', 'kernel/drivers/iio', 'kernel/drivers/hid',
    'kernel/drivers/usb', 'kernel/drivers/input',
)

_DEPENDS_RE = re.compile(r'^\s*Depends:\s*linux-image-(\S+)\s*$', re.M)
_CANDIDATE_RE = re.compile(r'^\s*Candidate:\s*(\S+)\s*$', re.M)
_RELEASE_RE = re.compile(r'^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-amd64$')


class AptError(ValueError):
    """apt printed something this module cannot read."""


def kernel_release(depends_output):
    """``apt-cache depends linux-image-amd64`` -> ``6.1.0-57-amd64``.

    The metapackage depends on exactly one versioned image; anything else
    (no such line, an unexpected name) raises :class:`AptError`.
    """
    found = _DEPENDS_RE.findall(depends_output)
    releases = [r for r in found if _RELEASE_RE.match(r)]
    if len(releases) != 1:
        raise AptError('expected one "Depends: linux-image-X.Y.Z-N-amd64" '
                       'line from apt-cache depends linux-image-amd64, got '
                       '%r' % (found,))
    return releases[0]


def candidate(policy_output):
    """The ``Candidate:`` version of ``apt-cache policy PKG``; None when
    apt has none (``(none)``) or printed no such line."""
    match = _CANDIDATE_RE.search(policy_output)
    if not match or match.group(1) == '(none)':
        return None
    return match.group(1)


def host_packages(release):
    """Every host package, including the headers matching ``release``."""
    return HOST_PACKAGES + ('linux-headers-%s' % release,)


def guest_packages(release):
    """Every package of the VM, the unsigned kernel image included."""
    return GUEST_PACKAGES + ('linux-image-%s-unsigned' % release,)


def _deb822_stanzas(text):
    stanza = []
    for line in text.splitlines() + ['']:
        if line.strip():
            stanza.append(line)
        elif stanza:
            yield stanza
            stanza = []


def _fields(stanza):
    fields = {}
    key = None
    for line in stanza:
        if line.startswith('#'):
            continue
        if line[:1].isspace() and key:
            fields[key] += ' ' + line.strip()
            continue
        key, _, value = line.partition(':')
        key = key.strip().lower()
        fields[key] = value.strip()
    return fields


def _is_debian(fields):
    signed = fields.get('signed-by', '')
    suites = fields.get('suites', '').split()
    return (fields.get('types', '').split()[:1] == ['deb']
            and any(s.split('-')[0] == SUITE for s in suites)
            and (not signed or 'debian-archive-keyring' in signed))


def debian_sources(files):
    """The Debian entries of the host's apt sources, for the VM.

    ``files`` is ``[(name, text)]``: ``*.sources`` files are deb822,
    ``*.list`` files one-line format. Returns ``(mirror, lines)``: the first
    URI that serves ``bookworm`` itself (for debootstrap) and one-line
    ``deb`` entries for every Debian suite found (bookworm, -updates,
    -security), so that the VM gets the same package versions as the host.
    Raises :class:`AptError` when no entry serves ``bookworm``.
    """
    entries = []
    for name, text in files:
        if name.endswith('.sources'):
            for stanza in _deb822_stanzas(text):
                fields = _fields(stanza)
                if not _is_debian(fields):
                    continue
                for uri in fields.get('uris', '').split():
                    for suite in fields['suites'].split():
                        entries.append((uri, suite,
                                        fields.get('components', 'main')))
        elif name.endswith('.list'):
            for line in text.splitlines():
                parts = line.split('#', 1)[0].split()
                if len(parts) >= 4 and parts[0] == 'deb' and \
                        not parts[1].startswith('[') and \
                        parts[2].split('-')[0] == SUITE:
                    entries.append((parts[1], parts[2], ' '.join(parts[3:])))
    mirrors = [uri for uri, suite, _ in entries if suite == SUITE]
    if not mirrors:
        raise AptError('no apt source on this host serves Debian %s (looked '
                       'in %s)' % (SUITE, ', '.join(n for n, _ in files)
                                   or 'nothing'))
    lines = ['deb %s %s %s' % entry for entry in entries]
    return mirrors[0], lines
