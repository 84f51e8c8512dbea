"""Inside the VM: the environment of the scenario and its entry point.

Run by ``realhost-run`` at boot as ``python -m
nova_pci_mdev.tests.realhost.guest --phase NAME --out /results``. Phases:

* ``scenario`` (first boot): :mod:`.scenario` drives the CLI on
  ``qemu:///system`` through devices, check-config, claim, a real domain,
  release and exhaustion, and leaves one instance holding two mdevs;
* ``short`` (for CI, one boot): ``scenario`` up to ``release``;
* ``reboot`` (second boot of the same disk): :mod:`.scenario` checks that
  instance's mdevs came back, then :mod:`.failures` drives the sysfs and
  libvirt backends through the kernel's and libvirt's refusals.

What one phase hands to the next is kept in :data:`STATE` on the VM's disk.
The exit code is 0 when every check passed, 1 when one failed.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from nova_pci_mdev.tests.realhost import record

BIN = os.path.dirname(sys.executable)
CLI = os.path.join(BIN, 'nova-pci-mdev')
URI = 'qemu:///system'
CONF = '/etc/nova-pci-mdev/nova.conf'
STATE_DIR = '/var/lib/nova-pci-mdev'
STATE = '/var/lib/realhost/handover.json'
PARENT = 'mtty'
#: The type the scenario uses: two ports per mdev, 12 of them on a fresh
#: mtty (MAX_MTTYS = 24 ports shared by both types).
MDEV_TYPE = 'mtty-2'
SYSFS_PARENT = '/sys/class/mdev_bus/' + PARENT
SYSFS_MDEVS = '/sys/bus/mdev/devices'

NOVA_CONF = '''[pci]
device_spec = {"mdev_type": "mtty-*"}
alias = {"name": "mtty", "mdev_type": "%(type)s"}

[devices]
enabled_mdev_types = %(type)s

[mdev_%(type)s]
device_addresses = %(parent)s
mdev_class = CUSTOM_MTTY
''' % {'type': MDEV_TYPE, 'parent': PARENT}


class Env:
    """The VM as the checks see it: the CLI, sysfs, libvirt, hand-over."""

    def __init__(self, recorder):
        self.recorder = recorder
        self._conn = None

    # -- the CLI -----------------------------------------------------------

    def cli(self, check, *args, expect=None, fmt='json', timeout=600):
        argv = [CLI, '--connection', URI, '--config-file', CONF,
                '--state-dir', STATE_DIR, '--format', fmt] + list(args)
        return check.run(argv, timeout=timeout, expect=expect)

    def devices(self, check):
        return self.cli(check, 'devices', expect=0).json()

    # -- the kernel --------------------------------------------------------

    @staticmethod
    def sysfs_mdevs():
        """``{uuid: (parent, type)}`` straight from the kernel's sysfs."""
        found = {}
        try:
            names = os.listdir(SYSFS_MDEVS)
        except FileNotFoundError:
            return found
        for name in names:
            path = os.path.realpath(os.path.join(SYSFS_MDEVS, name))
            mdev_type = os.path.basename(os.path.realpath(
                os.path.join(path, 'mdev_type')))
            found[name] = (os.path.basename(os.path.dirname(path)),
                           mdev_type)
        return found

    @staticmethod
    def available(mdev_type=MDEV_TYPE):
        path = os.path.join(SYSFS_PARENT, 'mdev_supported_types', mdev_type,
                            'available_instances')
        with open(path) as handle:
            return int(handle.read())

    # -- libvirt -----------------------------------------------------------

    @property
    def conn(self):
        if self._conn is None:
            import libvirt
            libvirt.registerErrorHandler(lambda *a: None, None)
            self._conn = libvirt.open(URI)
        return self._conn

    def virsh(self, check, *args, expect=None, timeout=120):
        return check.run(['virsh', '-c', URI] + list(args), timeout=timeout,
                         expect=expect)

    # -- hand-over between phases -----------------------------------------

    @staticmethod
    def load():
        return read_handover(STATE)

    @staticmethod
    def save(data):
        write_handover(STATE, data)


def read_handover(path):
    """What an earlier phase (before the VM's reboot) left in ``path``:
    a JSON object, ``{}`` when it left nothing."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def write_handover(path, data):
    """Write ``data`` to ``path`` as JSON, durably and atomically (a power
    off between two phases leaves the old file or the new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + '.tmp', 'w') as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + '.tmp', path)


def wait_for(predicate, timeout, step=0.5):
    """Poll ``predicate`` until true or ``timeout`` s; return its value."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


def versions(check):
    """Facts about the VM's software, each from its own tool."""
    facts = {}
    for key, argv in (
            ('kernel', ['uname', '-r']),
            ('libvirt', ['virsh', '-c', URI, 'version', '--daemon']),
            ('qemu', ['qemu-system-x86_64', '--version']),
            ('mdevctl', ['mdevctl', '--version']),
            ('python', [sys.executable, '--version'])):
        result = check.run(argv, timeout=120)
        facts[key] = ' '.join(result.stdout.split()) if result.rc == 0 \
            else 'unknown (%s)' % result.rc
    return facts


def prepare(env, check):
    """Wait for udev and libvirtd, write nova.conf, record versions."""
    check.run(['udevadm', 'settle', '--timeout=120'], timeout=180)
    ready = wait_for(lambda: subprocess.run(
        ['virsh', '-c', URI, 'version'], capture_output=True).returncode
        == 0, 180, step=2)
    check.expect(ready, 'libvirtd did not answer on %s within 180 s' % URI)
    os.makedirs(os.path.dirname(CONF), exist_ok=True)
    with open(CONF, 'w') as handle:
        handle.write(NOVA_CONF)
    check.observe(CONF, NOVA_CONF)
    for key, value in versions(check).items():
        env.recorder.fact(key, value)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('--phase', required=True,
                        choices=('scenario', 'reboot', 'short'))
    parser.add_argument('--out', required=True)
    args = parser.parse_args(argv)
    from nova_pci_mdev.tests.realhost import failures
    from nova_pci_mdev.tests.realhost import scenario
    recorder = record.Recorder(args.phase, args.out)
    env = Env(recorder)
    try:
        with recorder.check('%s-ready' % args.phase,
                            'udev settled, libvirtd answers, nova.conf '
                            'written', required=True) as check:
            prepare(env, check)
        if args.phase in ('scenario', 'short'):
            scenario.first_boot(env, short=args.phase == 'short')
        else:
            scenario.after_reboot(env)
            failures.run_all(env)
    except record.Abort as exc:
        print('realhost: phase %s stopped after required check %s failed'
              % (args.phase, exc), flush=True)
    recorder.save()
    return 1 if recorder.failed() else 0


if __name__ == '__main__':
    sys.exit(main())
