"""The operator's scenario on the real host, through the CLI.

First boot (:func:`first_boot`; the ``short`` phase of CI stops after
``release``): the kernel's mtty parent and what libvirt
reports of it; ``devices``; ``check-config``; ``claim`` of two mdevs; a real
domain with the printed hostdevs, started paused by libvirt's QEMU; the
in-use removal refusals while it runs; ``release``; exhaustion; finally a
claim left in place for the reboot. After the reboot
(:func:`after_reboot`): the same mdevs are back with the same UUIDs on the
same parent after ``restore`` (``devices``, a view, lists the missing
ones and creates nothing) and ``devices`` shows them allocated.
"""

import os
import xml.etree.ElementTree as ET

from nova_pci_mdev.tests.realhost import failures
from nova_pci_mdev.tests.realhost import guest

I_CLAIM = '11111111-0000-4000-8000-000000000001'
I_FILL = '11111111-0000-4000-8000-000000000002'
I_REBOOT = '11111111-0000-4000-8000-000000000003'
DOMAIN = 'realhost-guest'


def _slots(devices, status=None, instance=None):
    return [d for d in devices
            if d['dev_type'] == 'mdev-vf' and d['parent_addr'] == guest.PARENT
            and d['mdev_type'] == guest.MDEV_TYPE
            and (status is None or d['status'] == status)
            and (instance is None or d['instance_uuid'] == instance)]


def _free(devices):
    """Free slots of the scenario's type: available slot records plus the
    parent's ``creatable`` count (slots not yet created are not listed one
    by one since the capacity bound)."""
    listed = len(_slots(devices, status='available'))
    for dev in devices:
        if dev['address'] == guest.PARENT and dev['dev_type'] == 'mdev-pf':
            listed += int((dev.get('extra_info') or {}).get('creatable', 0))
    return listed


def check_kernel(env, check):
    check.run(['lsmod'], timeout=60)
    types = os.path.join(guest.SYSFS_PARENT, 'mdev_supported_types')
    check.expect(os.path.isdir(types), '%s does not exist' % types)
    found = {}
    for name in sorted(os.listdir(types)):
        attrs = {}
        for attr in ('name', 'available_instances', 'device_api'):
            with open(os.path.join(types, name, attr)) as handle:
                attrs[attr] = handle.read().strip()
        found[name] = attrs
    check.observe('ls %s; cat */{name,available_instances,device_api}'
                  % types, '\n'.join('%s: %s' % kv for kv in found.items()))
    check.expect(set(found) == {'mtty-1', 'mtty-2'},
                 'expected types mtty-1 and mtty-2, found %s' % sorted(found))
    check.expect(found['mtty-2']['available_instances'] == '12',
                 'a fresh mtty offers 12 mtty-2 instances, it says %s'
                 % found['mtty-2']['available_instances'])


def check_libvirt_parent(env, check):
    """What libvirt itself lists as mdev-capable parents (a fact of libvirt,
    checked only for the answer being readable)."""
    listed = env.virsh(check, 'nodedev-list', '--cap', 'mdev_types',
                       expect=0).stdout.split()
    env.recorder.fact('libvirt_mdev_parents', listed)
    for name in listed:
        env.virsh(check, 'nodedev-dumpxml', name, expect=0)
    check.note('libvirt lists %s under --cap mdev_types'
               % (', '.join(listed) or 'nothing'))


def check_devices(env, check):
    devices = env.devices(check)
    parents = [d for d in devices if d['address'] == guest.PARENT]
    check.expect(len(parents) == 1 and parents[0]['dev_type'] == 'mdev-pf',
                 'devices shows no mdev-pf parent %s: %s'
                 % (guest.PARENT, parents))
    free = _free(devices)
    check.expect(free == env.available(),
                 'devices shows %d free %s slots, the kernel says %d'
                 % (free, guest.MDEV_TYPE, env.available()))
    env.cli(check, 'devices', fmt='table', expect=0)


def check_config(env, check):
    result = env.cli(check, 'check-config', fmt='table', expect=0)
    check.expect('configuration OK' in result.stdout,
                 'check-config did not say "configuration OK"')


def claim(env, check, instance, count):
    """Claim ``count`` mdevs for ``instance``; check they exist in sysfs;
    return (uuids, hostdev xml)."""
    before = env.available()
    result = env.cli(check, 'claim', '--extra-spec',
                     'pci_passthrough:alias=mtty:%d' % count, '--instance',
                     instance, expect=0).json()
    uuids = [d['address'] for d in result['devices']]
    check.expect(len(uuids) == count, 'claimed %d devices, asked for %d'
                 % (len(uuids), count))
    mdevs = env.sysfs_mdevs()
    for uuid in uuids:
        check.expect(mdevs.get(uuid) == (guest.PARENT, guest.MDEV_TYPE),
                     'mdev %s is not in sysfs under %s as %s (sysfs: %s)'
                     % (uuid, guest.PARENT, guest.MDEV_TYPE, mdevs))
    created = set(result['created_mdevs'])
    check.expect(env.available() == before - len(created),
                 'available_instances went from %d to %d after creating %d'
                 % (before, env.available(), len(created)))
    check.observe('sysfs after the claim', '\n'.join(
        '%s -> %s' % kv for kv in sorted(mdevs.items())))
    return uuids, result['devices_xml']


def check_persistence(env, check, uuids):
    """How the CLI's mdevs are known to libvirt and mdevctl."""
    env.virsh(check, 'nodedev-list', '--cap', 'mdev', '--all', expect=0)
    defined = check.run(['mdevctl', 'list', '--defined', '--dumpjson'],
                        timeout=120).stdout
    for uuid in uuids:
        check.expect(uuid in defined,
                     'mdev %s is not defined (persistent) in mdevctl' % uuid)
        name = 'mdev_' + uuid.replace('-', '_')
        info = env.virsh(check, 'nodedev-info', name)
        if info.rc != 0:
            info = env.virsh(check, 'nodedev-info',
                             '%s_%s' % (name, guest.PARENT))
        check.expect(info.rc == 0 and 'yes' in _field(info.stdout,
                                                      'Autostart'),
                     'libvirt does not autostart mdev %s' % uuid)


def _field(text, name):
    for line in text.splitlines():
        key, _, value = line.partition(':')
        if key.strip() == name:
            return value.strip()
    return ''


def domain_xml(devices_xml, name=DOMAIN):
    """A minimal TCG domain holding the CLI's ``<devices>`` hostdevs."""
    hostdevs = ET.fromstring(devices_xml)
    root = ET.fromstring(
        "<domain type='qemu'><name>%s</name>"
        "<memory unit='MiB'>64</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
        "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
        "</devices></domain>" % name)
    devices = root.find('devices')
    for hostdev in hostdevs:
        devices.append(hostdev)
    return ET.tostring(root, encoding='unicode')


def start_domain(env, check, devices_xml, name=DOMAIN):
    """Define and start (paused) a domain; return the virDomain."""
    import libvirt
    xml = domain_xml(devices_xml, name)
    check.observe('domain XML', xml)
    dom = env.conn.defineXML(xml)
    dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    state = dom.state()[0]
    check.expect(state == libvirt.VIR_DOMAIN_PAUSED,
                 'domain state is %s, expected paused' % state)
    live = dom.XMLDesc(0)
    check.observe('virsh dumpxml %s (hostdevs)' % name, '\n'.join(
        ET.tostring(h, encoding='unicode')
        for h in ET.fromstring(live).iter('hostdev')))
    check.run(['pgrep', '-a', 'qemu-system'], timeout=30, expect=0)
    return dom


def stop_domain(env, check, name=DOMAIN):
    import libvirt
    try:
        dom = env.conn.lookupByName(name)
    except libvirt.libvirtError:
        return
    if dom.isActive():
        dom.destroy()
    dom.undefine()
    check.observe('virsh destroy + undefine %s' % name, 'done')


def _unused_mdevs(env, devices):
    """mdevs of the scenario's type that exist and no instance holds."""
    held = {d['address'] for d in devices if d['instance_uuid']}
    return [u for u, where in env.sysfs_mdevs().items()
            if where == (guest.PARENT, guest.MDEV_TYPE) and u not in held]


def exhaust(env, check):
    devices = env.devices(check)
    free = _free(devices)
    unused = _unused_mdevs(env, devices)
    check.expect(free == env.available() + len(unused) and free > 0,
                 '%d free slots; the kernel can create %d more and has %d '
                 'unused mdevs' % (free, env.available(), len(unused)))
    too_many = env.cli(check, 'claim', '--extra-spec',
                       'pci_passthrough:alias=mtty:%d' % (free + 1),
                       '--instance', I_FILL, expect=1)
    check.expect('mtty' in too_many.stderr and str(free) in too_many.stderr,
                 'the refusal does not name alias mtty and the %d free: %s'
                 % (free, too_many.stderr))
    claim(env, check, I_FILL, free)
    check.expect(env.available() == 0, 'the kernel still offers %d'
                 % env.available())
    last = env.cli(check, 'claim', '--extra-spec',
                   'pci_passthrough:alias=mtty:1', expect=1)
    check.expect('mtty' in last.stderr and '0 free' in last.stderr,
                 'the refusal at 0 free does not say so: %s' % last.stderr)
    env.cli(check, 'release', '--instance', I_FILL, expect=0)


def first_boot(env, short=False):
    """The first boot's checks; ``short`` (CI) stops after release."""
    rec = env.recorder
    with rec.check('kernel-mtty', 'the kernel exposes mtty with types '
                   'mtty-1 and mtty-2', required=True) as check:
        check_kernel(env, check)
    with rec.check('libvirt-parents', 'what libvirt lists as mdev '
                   'parents (virsh nodedev-list --cap mdev_types)') as check:
        check_libvirt_parent(env, check)
    with rec.check('cli-devices', 'devices shows the mtty parent and its '
                   'free %s slots' % guest.MDEV_TYPE, required=True) as check:
        check_devices(env, check)
    with rec.check('cli-check-config', 'check-config passes the real '
                   'nova.conf') as check:
        check_config(env, check)
    with rec.check('cli-claim', 'claim pci_passthrough:alias=mtty:2 creates '
                   'two real mdevs', required=True) as check:
        uuids, devices_xml = claim(env, check, I_CLAIM, 2)
    with rec.check('claim-persistent', 'the claimed mdevs are defined and '
                   'autostarted (libvirt node devices, mdevctl)') as check:
        check_persistence(env, check, uuids)
    with rec.check('domain-start', 'libvirt defines and starts (paused) a '
                   'domain with the printed hostdevs') as check:
        start_domain(env, check, devices_xml)
    failures.in_use(env, uuids[0])
    with rec.check('domain-stop', 'the domain is destroyed and undefined; '
                   'its mdevs stay') as check:
        stop_domain(env, check)
        mdevs = env.sysfs_mdevs()
        check.expect(all(u in mdevs for u in uuids),
                     'an mdev vanished with the domain: %s' % mdevs)
    with rec.check('cli-release', 'release frees both devices') as check:
        freed = env.cli(check, 'release', '--instance', I_CLAIM,
                        expect=0).json()['freed']
        check.expect(sorted(d['address'] for d in freed) == sorted(uuids),
                     'freed %s, expected %s' % (freed, uuids))
        devices = env.devices(check)
        check.expect(not _slots(devices, instance=I_CLAIM),
                     'devices still shows slots of %s' % I_CLAIM)
    if short:
        return
    with rec.check('cli-exhaustion', 'claims beyond mtty\'s instances exit '
                   '1 naming what is free') as check:
        exhaust(env, check)
    with rec.check('claim-for-reboot', 'an instance holds two mdevs before '
                   'the reboot') as check:
        uuids, _ = claim(env, check, I_REBOOT, 2)
        env.save({'reboot_instance': I_REBOOT, 'reboot_uuids': uuids})
        check.run(['sync'], timeout=60)


def _autostarted(env, check, uuids):
    """Which of ``uuids`` the host started by itself at boot (libvirt's
    autostart through mdevctl), waiting a little for udev; a fact."""
    check.run(['udevadm', 'settle', '--timeout=60'], timeout=90)
    guest.wait_for(lambda: all(u in env.sysfs_mdevs() for u in uuids), 20)
    back = sorted(u for u in uuids if u in env.sysfs_mdevs())
    check.run(['mdevctl', 'list', '--defined'], timeout=60)
    env.virsh(check, 'nodedev-list', '--cap', 'mdev', '--all')
    check.run(['journalctl', '-b', '--no-pager', '-t', 'mdevctl'],
              timeout=60)
    env.recorder.fact('autostarted_at_boot', '%d of %d persistent mdevs'
                      % (len(back), len(uuids)))
    check.note('%d of %d persistent, autostart mdevs existed after the boot '
               'before the CLI ran' % (len(back), len(uuids)))
    return back


def after_reboot(env):
    rec = env.recorder
    handover = env.load()
    uuids = handover.get('reboot_uuids', [])
    with rec.check('reboot-devices', 'after the reboot devices lists the '
                   'missing mdevs, restore brings the same mdevs back on '
                   'the same parent, still allocated'
                   ) as check:
        check.expect(uuids, 'the first boot handed over no mdevs')
        back = _autostarted(env, check, uuids)
        missing = sorted(set(uuids) - set(back))
        table = env.cli(check, 'devices', fmt='table', expect=0).stdout
        for uuid in missing:
            check.expect('allocated mdev %s is not on the host' % uuid
                         in table, 'devices did not list %s as missing'
                         % uuid)
        check.expect(env.sysfs_mdevs().keys() & set(missing) == set(),
                     'devices (a view) created mdevs on the host')
        restored = env.cli(check, 'restore', fmt='table', expect=0).stdout
        for uuid in missing:
            check.expect('restored %s' % uuid in restored,
                         'restore did not say it recreated %s' % uuid)
        devices = env.devices(check)
        held = _slots(devices, status='allocated',
                      instance=handover.get('reboot_instance'))
        check.expect(sorted(d['address'] for d in held) == sorted(uuids),
                     'allocated slots %s, expected %s' % (
                         [d['address'] for d in held], uuids))
        mdevs = env.sysfs_mdevs()
        for uuid in uuids:
            check.expect(mdevs.get(uuid) == (guest.PARENT, guest.MDEV_TYPE),
                         'mdev %s is not back under %s: %s'
                         % (uuid, guest.PARENT, mdevs))
