"""Booting the image under QEMU: accelerator choice, one boot per phase.

Each phase is one boot of the same copy-on-write overlay of the cached
image (so the cached image never changes and a second boot is a real
reboot: the kernel's mdevs are gone, the disk keeps libvirt's and our
state). The guest's ``realhost-scenario.service`` runs the phase named on
the kernel command line and powers the VM off; QEMU runs with
``-no-reboot``, so it exits when the guest is done. Results come back
through a 9p share (``mount_tag=results``).

KVM is used only when a probe boot with it works: on this machine kind
``/dev/kvm`` exists but nested KVM fails ("failed to set MSR 0x10a"), and
TCG is the norm.
"""

import json
import os
import shlex
import shutil
import subprocess
import time

from nova_pci_mdev.tests.realhost import steps

QEMU = 'qemu-system-x86_64'
MEMORY_MB = 2048
CPUS = 2
TCG = 'tcg,thread=multi'


def _qemu_base(accel, kernel, serial, append, memory=MEMORY_MB):
    return [QEMU, '-name', 'realhost', '-machine', 'q35', '-accel', accel,
            '-m', str(memory), '-smp', str(CPUS), '-nodefaults',
            '-no-user-config', '-display', 'none', '-no-reboot',
            '-serial', 'file:' + serial, '-kernel', kernel,
            '-append', append, '-nic', 'none']


def probe_kvm(log, kernel, workdir, timeout=30):
    """(True, reason) when a KVM guest boots this kernel to its end.

    The probe boots the kernel without a root disk: it panics at once
    ("VFS: Unable to mount root fs") and, with ``panic=-1`` and
    ``-no-reboot``, QEMU exits 0. A QEMU that fails (nested KVM's MSR
    errors) or hangs means TCG.
    """
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        return False, '/dev/kvm is not usable'
    serial = os.path.join(workdir, 'serial-kvm-probe.log')
    argv = _qemu_base('kvm', kernel, serial, 'console=ttyS0 panic=-1',
                      memory=256)
    try:
        proc = steps.run(log, 'probe KVM', argv, timeout=timeout,
                         check=False)
    except steps.StepFailed:
        return False, ('a KVM probe boot did not finish in %d s (nested '
                       'KVM hangs or fails here)' % timeout)
    try:
        with open(serial, errors='replace') as handle:
            text = handle.read()
    except FileNotFoundError:
        text = ''
    if proc.returncode == 0 and 'Kernel panic' in text:
        return True, 'a KVM probe boot reached the kernel\'s end'
    reason = steps.tail(proc.stdout, 2).replace('\n', ' ') or 'no output'
    return False, 'KVM probe failed (exit %d): %s' % (proc.returncode,
                                                      reason)


def _probe_key(kernel):
    """What a KVM probe's answer depends on: the host kernel, QEMU, the
    guest kernel."""
    qemu = shutil.which(QEMU) or QEMU
    parts = [os.uname().release]
    try:
        with open(kernel, 'rb') as handle:     # copied anew with each image
            parts.append(steps.digest(handle.read()))
    except OSError:
        parts.append(kernel + ':missing')
    for path in (qemu, '/dev/kvm'):
        try:
            st = os.stat(path)
            parts.append('%s:%d:%d' % (path, st.st_size, st.st_mtime_ns))
        except OSError:
            parts.append(path + ':missing')
    return steps.digest(*parts)


def cached_probe(log, kernel, workdir, cache):
    """:func:`probe_kvm`, its answer kept in ``<cache>/kvm-probe.json``
    until the host kernel, QEMU or the guest kernel change."""
    path = os.path.join(cache, 'kvm-probe.json')
    key = _probe_key(kernel)
    try:
        with open(path) as handle:
            saved = json.load(handle)
        if saved.get('key') == key:
            return saved['ok'], saved['reason'] + ' (cached probe)'
    except (OSError, ValueError, KeyError):
        pass
    ok, reason = probe_kvm(log, kernel, workdir)
    with open(path, 'w') as handle:
        json.dump({'key': key, 'ok': ok, 'reason': reason}, handle)
    return ok, reason


def choose_accel(log, wanted, kernel, workdir, cache):
    """``(accel, reason)`` for ``wanted`` in auto/kvm/tcg."""
    if wanted == 'tcg':
        return TCG, 'asked for'
    ok, reason = cached_probe(log, kernel, workdir, cache)
    if ok:
        return 'kvm', reason
    if wanted == 'kvm':
        raise steps.StepFailed('choose the accelerator', reason)
    return TCG, reason + '; using TCG'


def make_overlay(log, disk, overlay):
    if os.path.exists(overlay):
        os.unlink(overlay)
    steps.run(log, 'create the run\'s disk overlay',
              ['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'raw',
               '-b', disk, overlay])


class Boot:
    """One boot of the VM running ``phase``; :meth:`wait` returns the
    phase's exit code (as written by the guest) and echoes the guest's
    ``realhost:`` console lines as they appear."""

    def __init__(self, log, img, overlay, results, accel, phase, workdir):
        self.log = log
        self.phase = phase
        self.results = results
        self.serial = os.path.join(workdir, 'serial-%s.log' % phase)
        append = ('root=/dev/vda rw console=ttyS0 panic=-1 '
                  'systemd.show_status=1 realhost.phase=%s' % phase)
        self.argv = _qemu_base(accel, img.kernel, self.serial, append) + [
            '-initrd', img.initrd,
            '-drive', 'file=%s,if=virtio,format=qcow2' % overlay,
            '-virtfs', 'local,path=%s,mount_tag=results,'
                       'security_model=none,id=results' % results,
            '-device', 'virtio-rng-pci']
        self.stderr = os.path.join(workdir, 'qemu-%s.stderr' % phase)

    def _console_lines(self, seen):
        try:
            with open(self.serial, 'rb') as handle:
                handle.seek(seen)
                chunk = handle.read()
        except FileNotFoundError:
            return seen
        text = chunk.decode('utf-8', 'replace')
        if '\n' not in text:
            return seen
        text = text[:text.rindex('\n') + 1]
        for line in text.splitlines():
            if 'realhost:' in line:
                self.log.note('guest: ' + line[line.index('realhost:'):])
        return seen + len(text.encode('utf-8', 'replace'))

    def wait(self, timeout):
        self.log.note('booting phase %s: %s'
                      % (self.phase, shlex.join(self.argv)))
        start = time.monotonic()
        seen = 0
        with open(self.stderr, 'w') as err:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                    stdout=err, stderr=subprocess.STDOUT)
            try:
                while proc.poll() is None:
                    if time.monotonic() - start > timeout:
                        proc.kill()
                        proc.wait()
                        raise steps.StepFailed(
                            'phase %s' % self.phase,
                            'the VM did not power off within %d s; last '
                            'console lines:\n%s' % (timeout,
                                                    self.console_tail()))
                    time.sleep(2)
                    seen = self._console_lines(seen)
            except BaseException:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                raise
        self._console_lines(seen)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            with open(self.stderr, errors='replace') as handle:
                qemu_err = steps.tail(handle.read(), 5)
            raise steps.StepFailed('phase %s' % self.phase,
                                   'QEMU exited %d: %s' % (proc.returncode,
                                                           qemu_err))
        rc_path = os.path.join(self.results, 'phase-%s.rc' % self.phase)
        try:
            with open(rc_path) as handle:
                rc = int(handle.read().strip())
        except (FileNotFoundError, ValueError):
            raise steps.StepFailed(
                'phase %s' % self.phase,
                'the VM powered off without writing %s; last console '
                'lines:\n%s' % (rc_path, self.console_tail()))
        return rc, elapsed

    def console_tail(self, lines=25):
        try:
            with open(self.serial, errors='replace') as handle:
                return steps.tail(handle.read(), lines)
        except FileNotFoundError:
            return '(no console output)'
