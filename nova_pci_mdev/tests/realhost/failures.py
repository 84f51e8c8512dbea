"""The mdev backends' failure paths on the real kernel and libvirt.

Each backend operation runs in a child process (``python -m
nova_pci_mdev.tests.realhost.failures BACKEND OP ARGS...``, printing one
JSON line): a write to sysfs that the kernel blocks (removing an mdev a
running QEMU holds waits until QEMU lets go) must not hang the scenario,
and a blocked child is recorded as such. Every check compares the mdevs
the kernel lists before and after: a refusal must leave them as they were.
"""

import json
import os
import subprocess
import sys
import time
import uuid as uuid_lib

from nova_pci_mdev.tests.realhost import guest

BLOCK_TIMEOUT = 30


def _backend(kind):
    if kind == 'sysfs':
        from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend
        return sysfs_backend.SysfsBackend('/')
    import libvirt
    from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend
    libvirt.registerErrorHandler(lambda *a: None, None)
    return libvirt_backend.LibvirtNodeDeviceBackend(libvirt.open(guest.URI))


def child_main(argv):
    """``BACKEND OP ARGS...`` -> one JSON line: the result or the error."""
    from nova_pci_mdev import exception
    kind, op, args = argv[0], argv[1], argv[2:]
    try:
        value = getattr(_backend(kind), op)(*args)
        out = {'ok': True, 'value': _plain(value)}
    except exception.NovaPciMdevException as exc:
        out = {'ok': False, 'error': type(exc).__name__, 'message': str(exc),
               'kwargs': {k: str(v) for k, v in exc.kwargs.items()}}
    except Exception as exc:    # a raw error is a product bug: report it
        out = {'ok': False, 'error': 'UNWRAPPED ' + type(exc).__name__,
               'message': str(exc), 'kwargs': {}}
    print(json.dumps(out))
    return 0


def _plain(value):
    if isinstance(value, dict):
        return {k: list(v) for k, v in value.items()}
    return value


class Call:
    """A backend operation running in a child process."""

    def __init__(self, check, kind, op, *args):
        self.check = check
        self.what = '%s backend: %s(%s)' % (kind, op, ', '.join(args))
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'nova_pci_mdev.tests.realhost.failures',
             kind, op] + list(args), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.start = time.monotonic()

    def result(self, timeout=BLOCK_TIMEOUT, record=True):
        """The child's JSON answer, or None when it is still blocked after
        ``timeout`` s (it is left running: the kernel may not let it go)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            if record:
                self.check.observe(self.what, 'still blocked after %d s'
                                   % timeout)
            return None
        seconds = time.monotonic() - self.start
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            answer = {'ok': False, 'error': 'no answer', 'message': err[-800:],
                      'kwargs': {}}
        if record:
            self.check.observe('%s after %.1f s' % (self.what, seconds),
                               json.dumps(answer, indent=1))
        return answer


def call(check, kind, op, *args, timeout=BLOCK_TIMEOUT):
    return Call(check, kind, op, *args).result(timeout)


def expect_refusal(check, answer, names, errno=None):
    """The answer is our MdevError family, naming every one of ``names``."""
    check.expect(answer is not None, 'the call did not return')
    check.expect(not answer['ok'], 'the backend did not refuse')
    check.expect(answer['error'].startswith('Mdev'),
                 'expected an MdevError, got %s: %s' % (
                     answer['error'], answer['message']))
    for name in names:
        check.expect(name in answer['message'],
                     'the error does not name %s: %s'
                     % (name, answer['message']))
    if errno is not None:
        check.expect(answer['kwargs'].get('errno') == errno,
                     'errno %s, expected %s' % (answer['kwargs'].get('errno'),
                                                errno))


def unchanged(check, env, before):
    after = env.sysfs_mdevs()
    check.expect(after == before, 'the kernel\'s mdevs changed: before %s, '
                 'after %s' % (sorted(before), sorted(after)))


def in_use(env, uuid):
    """Removing an mdev a running domain holds, through both backends."""
    for kind in ('libvirt', 'sysfs'):
        with env.recorder.check(
                'in-use-%s' % kind, '%s backend: removing mdev %s while the '
                'domain runs is refused, naming it' % (kind, uuid)) as check:
            before = env.sysfs_mdevs()
            pending = Call(check, kind, 'remove', uuid)
            answer = pending.result()
            if answer is None:
                check.note('the %s backend blocked: the kernel waits for '
                           'the domain to release the mdev' % kind)
                _unblock(env, check, pending)
                check.expect(False, '%s backend: remove(%s) blocked instead '
                             'of refusing' % (kind, uuid))
            expect_refusal(check, answer, [uuid])
            unchanged(check, env, before)


def _unblock(env, check, pending):
    """Destroy the domain so that a blocked removal can finish."""
    from nova_pci_mdev.tests.realhost import scenario
    scenario.stop_domain(env, check)
    answer = pending.result(timeout=120)
    check.observe('after destroying the domain', json.dumps(answer))


def _write(path, data):
    with open(path, 'w') as handle:
        handle.write(data)


def _fill(env, check):
    """Create mdevs (plain sysfs writes: set-up, not under test) until the
    kernel offers none; return their UUIDs."""
    made = []
    create = os.path.join(guest.SYSFS_PARENT, 'mdev_supported_types',
                          guest.MDEV_TYPE, 'create')
    while env.available() > 0 and len(made) < 64:
        made.append(str(uuid_lib.uuid4()))
        _write(create, made[-1])
    check.observe('filled %s with %d mdevs (echo UUID > %s)'
                  % (guest.PARENT, len(made), create), ' '.join(made))
    return made


def _empty(env, check, made):
    for uuid in made:
        _write(os.path.join(guest.SYSFS_MDEVS, uuid, 'remove'), '1')
    check.expect(not set(made) & set(env.sysfs_mdevs()),
                 'the fill mdevs were not all removed')


def exists_and_exhausted(env, existing):
    for kind in ('sysfs', 'libvirt'):
        with env.recorder.check(
                'eexist-%s' % kind, '%s backend: creating an mdev whose '
                'UUID exists is refused, naming it' % kind) as check:
            before = env.sysfs_mdevs()
            answer = call(check, kind, 'create', existing, guest.PARENT,
                          guest.MDEV_TYPE)
            expect_refusal(check, answer, [existing])
            unchanged(check, env, before)
    for kind in ('sysfs', 'libvirt'):
        with env.recorder.check(
                'exhausted-%s' % kind, '%s backend: creating an mdev when '
                'the parent has no instance left is refused' % kind) as check:
            made = _fill(env, check)
            try:
                before = env.sysfs_mdevs()
                extra = str(uuid_lib.uuid4())
                answer = call(check, kind, 'create', extra, guest.PARENT,
                              guest.MDEV_TYPE)
                expect_refusal(check, answer, [extra, guest.PARENT])
                unchanged(check, env, before)
                answer = call(check, kind, 'available', guest.PARENT,
                              guest.MDEV_TYPE)
                check.expect(answer['ok'] and answer['value'] == 0,
                             'available() says %s, expected 0' % answer)
            finally:
                _empty(env, check, made)


def parent_gone(env, held):
    """Unload mtty: the backends refuse naming the parent, the CLI keeps the
    allocation; load it again: ``restore`` brings the mdevs back."""
    with env.recorder.check('parent-gone', 'with mtty unloaded both backends '
                            'refuse naming the parent; devices keeps the '
                            'allocation') as check:
        check.run(['modprobe', '-r', 'mtty'], timeout=120, expect=0)
        check.expect(not env.sysfs_mdevs(), 'mdevs survived the unload')
        for kind in ('sysfs', 'libvirt'):
            new = str(uuid_lib.uuid4())
            expect_refusal(check, call(check, kind, 'create', new,
                                       guest.PARENT, guest.MDEV_TYPE),
                           [new, guest.PARENT])
            answer = call(check, kind, 'available', guest.PARENT,
                          guest.MDEV_TYPE)
            expect_refusal(check, answer, [guest.PARENT])
        devices = env.devices(check)
        kept = [d['address'] for d in devices if d['address'] in held
                and d['status'] == 'allocated']
        check.expect(sorted(kept) == sorted(held),
                     'devices lost allocated mdevs: kept %s of %s'
                     % (kept, held))
    with env.recorder.check('parent-back', 'mtty loaded again: restore '
                            'recreates the allocated mdevs') as check:
        check.run(['modprobe', 'mtty'], timeout=120, expect=0)
        check.run(['udevadm', 'settle'], timeout=120)
        env.cli(check, 'devices', fmt='table', expect=0)
        check.expect(not set(env.sysfs_mdevs()) & set(held),
                     'devices (a view) recreated mdevs')
        env.cli(check, 'restore', fmt='table', expect=0)
        mdevs = env.sysfs_mdevs()
        for uuid in held:
            check.expect(mdevs.get(uuid) == (guest.PARENT, guest.MDEV_TYPE),
                         'mdev %s is not back: %s' % (uuid, mdevs))


def run_all(env):
    handover = env.load()
    held = handover.get('reboot_uuids', [])
    if not held:
        return
    exists_and_exhausted(env, held[0])
    parent_gone(env, held)
    with env.recorder.check('final-release', 'release of the instance held '
                            'across the reboot') as check:
        env.cli(check, 'release', '--instance', handover['reboot_instance'],
                expect=0)


if __name__ == '__main__':
    sys.exit(child_main(sys.argv[1:]))
