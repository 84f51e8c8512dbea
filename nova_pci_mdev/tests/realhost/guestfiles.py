"""Files the image gets on top of its packages: the boot-time scenario unit,
its runner, fstab, hostname, the modules to load at boot.

At boot ``realhost-scenario.service`` runs ``realhost-run``, which reads
``realhost.phase=NAME`` from the kernel command line (no phase: it does
nothing, so the image also boots for manual use), mounts the host's 9p
share ``results`` on ``/results``, runs the phase with the project's venv
(``python -m nova_pci_mdev.tests.realhost.guest --phase NAME``) writing
``phase-NAME.log`` and ``phase-NAME.rc`` there, and the unit powers the VM
off when it ends, whatever happened. Phase ``exec`` runs ``/results/exec.sh``
instead (for exploring the VM without rebuilding the image); the phases
``series*`` run :mod:`.series_guest` with the series venv.
"""

from nova_pci_mdev.tests.realhost import steps

RUNNER = r'''#!/bin/sh
# Started by realhost-scenario.service; see guestfiles.py in the project.
phase=$(sed -n 's/.*realhost\.phase=\([a-z0-9-]*\).*/\1/p' /proc/cmdline)
[ -n "$phase" ] || exit 0
say() { echo "realhost: $*" > /dev/console; }
mkdir -p /results
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 \
        results /results; then
    say "cannot mount the 9p share 'results'"
    exit 1
fi
say "phase $phase starting"
if [ "$phase" = exec ]; then
    sh /results/exec.sh > /results/phase-exec.log 2>&1
elif [ "${phase#series}" != "$phase" ]; then
    # tools/realhost --series: the patched Nova's venv runs the scenario
    /opt/nova-series/bin/python \
        -m nova_pci_mdev.tests.realhost.series_guest \
        --phase "$phase" --out /results > "/results/phase-$phase.log" 2>&1
else
    /opt/nova-pci-mdev/bin/python -m nova_pci_mdev.tests.realhost.guest \
        --phase "$phase" --out /results > "/results/phase-$phase.log" 2>&1
fi
rc=$?
echo "$rc" > "/results/phase-$phase.rc"
sync
say "phase $phase finished with exit code $rc"
exit 0
'''

UNIT = '''[Unit]
Description=nova-pci-mdev real-host scenario (realhost.phase= on the kernel \
command line)
Wants=libvirtd.service virtlogd.socket
After=libvirtd.service virtlogd.socket systemd-modules-load.service \
systemd-udev-trigger.service
SuccessAction=poweroff
FailureAction=poweroff

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/realhost-run
TimeoutStartSec=5400
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
'''

FSTAB = '/dev/vda / ext4 rw,relatime,errors=remount-ro 0 0\n'

#: Loaded at boot, as a GPU's driver would be: the mtty parent is there
#: before libvirt and mdevctl look for mdevs to start.
MODULES = 'vfio\nvfio_iommu_type1\nmdev\nmtty\n'


#: libvirt-guests at the VM's shutdown: Debian's default asks each running
#: guest to shut down and waits up to 300 s for it; the guests here have no
#: operating system and never answer, so each one cost 300 s of every
#: reboot. Waiting 10 s changes nothing else: they end with the VM as
#: before (power cut), and nothing starts them at boot (nova-compute decides
#: what runs, as Nova wants libvirt-guests configured on a compute host).
LIBVIRT_GUESTS = '''# tools/realhost (see guestfiles.py in the project)
ON_BOOT=ignore
ON_SHUTDOWN=shutdown
SHUTDOWN_TIMEOUT=10
'''


def files():
    """``{path: (text, mode)}`` written into the root file system."""
    return {
        '/usr/local/sbin/realhost-run': (RUNNER, 0o755),
        '/etc/systemd/system/realhost-scenario.service': (UNIT, 0o644),
        '/etc/fstab': (FSTAB, 0o644),
        '/etc/hostname': ('realhost\n', 0o644),
        '/etc/hosts': ('127.0.0.1 localhost\n127.0.1.1 realhost\n', 0o644),
        '/etc/modules-load.d/realhost.conf': (MODULES, 0o644),
        '/etc/default/libvirt-guests': (LIBVIRT_GUESTS, 0o644),
    }


def links():
    """``{link: target}`` symlinks (enabling the unit)."""
    return {
        '/etc/systemd/system/multi-user.target.wants/'
        'realhost-scenario.service':
            '/etc/systemd/system/realhost-scenario.service',
    }


#: Removed: libvirt's default NAT network would fail to autostart (no
#: dnsmasq, no network) and only slow the boot down; MariaDB does not start
#: at boot (only ``tools/realhost --series`` uses it and starts it).
REMOVED = ('/etc/libvirt/qemu/networks/autostart/default.xml',
           '/etc/systemd/system/multi-user.target.wants/mariadb.service')


def digest():
    """Digest of everything above (part of the image's key)."""
    parts = []
    for path, (text, mode) in sorted(files().items()):
        parts += [path, text, str(mode)]
    for link, target in sorted(links().items()):
        parts += [link, target]
    return steps.digest(*parts, *REMOVED)
