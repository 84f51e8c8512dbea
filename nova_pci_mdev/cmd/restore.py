"""``nova-pci-mdev restore``: bring a rebooted host back to its claims.

What nova-compute does when it starts: every allocated mdev that the host
no longer runs (a reboot, a reloaded parent driver) is created again with
the same UUID on the same parent, and every allocated NVIDIA vGPU VF gets
its vGPU type back; then the discovered devices are recorded. The views
(``devices``, ``pools``, ``inventory``) and dry runs never do this: they
only read the host, and ``devices`` lists the allocated mdevs it misses.

Best effort per device, as at a service start: one mdev that cannot be
recreated does not keep the others down. Exit 0 when everything allocated
is on the host afterwards, 3 (a host failure) when something could not be
restored, with one line per device naming it and the reason.
"""

from nova_pci_mdev.cmd import common


def cmd_restore(args, out):
    from nova_pci_mdev.cmd import render
    compute = common.build_compute_host(args, common.load_settings(args))
    _report, restored = compute.sync()
    failed = sorted(restored.failed.items())
    if args.format == 'json':
        out.write(render.to_json({
            'host': compute.nodename,
            'restored': list(restored.recreated),
            'failed': {device: str(exc) for device, exc in failed}}) + '\n')
    else:
        for device in restored.recreated:
            out.write('restored %s\n' % device)
        for device, exc in failed:
            out.write('could not restore %s: %s\n' % (device, exc))
        if not restored.recreated and not failed:
            out.write('host %s: every allocated device is on the host\n'
                      % compute.nodename)
    return common.EXIT_HOST if failed else common.EXIT_OK


def add_commands(add):
    """Register the command with ``add(name, func, help)`` (cmd/cli.py's)."""
    add('restore', cmd_restore,
        'after a host reboot: recreate the allocated mdevs that vanished '
        '(same UUID, same parent) and give allocated vGPU VFs their type '
        'back')
