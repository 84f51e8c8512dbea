"""``nova-pci-mdev``: the operator's view of a compute host's devices.

Exit codes: 0 success; 1 the request cannot be satisfied on this host;
2 bad input or configuration (one line per problem); 3 the host or the
state directory failed (libvirt, sysfs, store).

With no options the command works on the bundled sample host (libvirt's
test driver with ``nova_pci_mdev/data/sample_host.xml``) and its
``nova.conf``. A ``test://`` connection keeps its mdevs in the state
directory (the test driver cannot create them); ``qemu:///system`` uses
libvirt node devices (libvirt >= 7.3) or sysfs.
"""

import argparse
import os
import sys
import uuid as uuid_lib

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.cmd import common
from nova_pci_mdev.cmd import live
from nova_pci_mdev.cmd import restore
from nova_pci_mdev.store import state_dir as state_dir_mod

default_state_dir = state_dir_mod.default_state_dir


# -- commands --------------------------------------------------------------

def _host_problems(args, settings):
    """Problems that need the host (:mod:`.conf.host_checks`, recorded by
    the session's sync), and what each GPU with NVIDIA vGPU VFs can serve."""
    compute = common.build_compute_host(args, settings)
    host_problems, states = compute.host_problems()
    problems = list(compute.host.left_out) + host_problems
    args.left_out_shown = True
    if states:
        # Only hosts with NVIDIA vGPU VFs: the notes read their records.
        from nova_pci_mdev.virt.libvirt.nvidia import check as nvidia_check
        from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf
        records = nvidia_vf.apply(compute.host.discover(settings), states,
                                  settings)
        problems.extend(nvidia_check.gpu_notes(records, states, settings))
    return problems


def cmd_check_config(args, out):
    from nova_pci_mdev import conf as conf_mod
    from nova_pci_mdev.cmd import render
    cfg = conf_mod.new_config(args.config_file)
    problems = list(conf_mod.validate(cfg))
    errors = [p for p in problems if getattr(p, 'severity', 'error')
              == 'error']
    if not errors:
        settings = conf_mod.load_settings(cfg)
        problems.extend(_host_problems(args, settings))
        errors = [p for p in problems if p.severity == 'error']
    if args.format == 'json':
        out.write(render.to_json([
            {'severity': getattr(p, 'severity', 'error'), 'message': str(p),
             **{k: str(v) for k, v in p.kwargs.items()}}
            for p in problems]) + '\n')
    else:
        for problem in problems:
            out.write('%s: %s\n' % (getattr(problem, 'severity', 'error'),
                                    problem))
        if all(getattr(p, 'severity', None) == 'note' for p in problems):
            out.write('configuration OK: %d device spec(s), %d alias(es), '
                      '%d enabled mdev type(s)\n' % (
                          len(settings.whitelist.specs),
                          len(settings.aliases.names()),
                          len(settings.enabled_mdev_types)))
    return common.EXIT_INVALID if errors else common.EXIT_OK


def _view(args, tree=False):
    """What ``devices``, ``pools`` and ``inventory`` show: the host's
    :meth:`~.ComputeHost.stored_view` when its last sync still holds (no
    tracker is built), else a :meth:`~.ComputeHost.snapshot` (a sync);
    either has ``devices``, ``unlisted``, ``pools``, ``instances``,
    ``placement_used`` and ``missing``. Returns ``(compute, view, tree)``
    (``tree`` None unless asked for)."""
    compute = common.build_compute_host(args, common.load_settings(args))
    view = compute.stored_view()
    if view is not None:
        return compute, view, compute.stored_tree(view) if tree else None
    snap = compute.snapshot(tree=tree)
    return compute, snap, snap.tree


def cmd_devices(args, out):
    from nova_pci_mdev.cmd import render
    compute, snap, _tree = _view(args)
    instances, tracked = len(snap.instances), len(snap.devices)
    notes = list(render.missing_lines(snap.missing, snap.devices))
    unlisted = {d.address for d in snap.unlisted}
    everything = snap.devices + snap.unlisted
    left_out = compute.host.left_out    # listed too (and warned about)
    if args.format == 'json':
        render.write_json_list(out, (
            dict(render.device_dict(d), whitelisted=d.address not in unlisted)
            for d in everything), render.left_out_dicts(left_out))
        return common.EXIT_OK
    out.write('host %s: %d devices (%d whitelisted), %s%d instance(s)\n' % (
        compute.nodename, len(everything), tracked,
        render.left_out_count(left_out), instances))
    out.writelines(line + '\n' for line in notes)
    for line in render.device_tree_lines(
            everything, lambda d: d.address not in unlisted, left_out):
        out.write(line + '\n')
    return common.EXIT_OK


def cmd_pools(args, out):
    from nova_pci_mdev.cmd import render
    _compute, view, _tree = _view(args)
    if args.format == 'json':
        out.write(render.to_json(render.pool_dicts(view.pools)) + '\n')
    else:
        out.write(render.pool_table(view.pools) + '\n')
    return common.EXIT_OK


def cmd_inventory(args, out):
    from nova_pci_mdev.cmd import render
    _compute, view, tree = _view(args, tree=True)
    if args.format == 'json':
        out.write(render.to_json(render.inventory_dict(
            tree, view.placement_used)) + '\n')
    else:
        out.write(render.inventory_table(tree, view.placement_used)
                  + '\n')
    return common.EXIT_OK


def cmd_claim(args, out):
    from nova_pci_mdev.cmd import render
    from nova_pci_mdev.compute import flavor as flavor_mod
    settings = common.load_settings(args)
    specs = flavor_mod.specs_from_pairs(args.extra_spec)
    flavor = flavor_mod.parse(specs, settings.aliases)
    if not flavor.pci_requests and not flavor.resource_groups:
        raise exception.InvalidExtraSpec(
            key='--extra-spec', value=' '.join(args.extra_spec) or '(none)',
            reason='asks for no device: give pci_passthrough:alias=NAME:N '
                   'or resources[N]:<RC>=N')
    instance = str(uuid_lib.uuid4()) if args.instance is None else (
        names.normalize_uuid(args.instance, '--instance'))
    compute = common.build_compute_host(args, settings)
    result = compute.claim(instance, flavor, dry_run=args.dry_run)
    if args.format == 'json':
        out.write(render.to_json({
            'instance_uuid': result.instance_uuid,
            'dry_run': result.dry_run,
            'numa_cells': result.numa_cells,
            'allocations': result.allocations,
            'created_mdevs': list(result.created_mdevs),
            'removed_mdevs': list(result.removed_mdevs),
            'devices': [render.device_dict(d) for d in result.devices],
            'devices_xml': result.devices_xml(),
        }) + '\n')
        return common.EXIT_OK
    verb = 'would claim' if result.dry_run else 'claimed'
    out.write('instance %s %s %d device(s)%s\n' % (
        result.instance_uuid, verb, len(result.devices),
        '' if result.numa_cells is None else
        ' on NUMA cell(s) %s' % ','.join(map(str, result.numa_cells))))
    rows = [(d.address, d.dev_type, d.mdev_type, d.parent_addr, d.numa_node,
             'dry run' if result.dry_run else d.status)
            for d in result.devices]
    out.write(render.table(('address', 'dev_type', 'mdev_type', 'parent_addr',
                            'numa_node', 'status'), rows) + '\n')
    if result.created_mdevs:
        out.write('created mdev(s): %s\n' % ', '.join(result.created_mdevs))
    if result.removed_mdevs:
        out.write('removed mdev(s) of parents passed through whole: %s\n'
                  % ', '.join(result.removed_mdevs))
    for prov, res in sorted(result.allocations.items()):
        out.write('placement allocation on %s: %s\n' % (prov, ', '.join(
            '%s=%d' % kv for kv in sorted(res.items()))))
    out.write('guest devices:\n%s\n' % result.devices_xml())
    return common.EXIT_OK


def cmd_release(args, out):
    from nova_pci_mdev.cmd import render
    args.instance = names.normalize_uuid(args.instance, '--instance')
    compute = common.build_compute_host(args, common.load_settings(args))
    freed = compute.release(args.instance)
    if args.format == 'json':
        out.write(render.to_json({
            'instance_uuid': args.instance,
            'freed': [render.device_dict(d) for d in freed]}) + '\n')
    elif freed:
        out.write('instance %s released %d device(s): %s\n' % (
            args.instance, len(freed), ', '.join(d.address for d in freed)))
    else:
        out.write('instance %s holds no device on this host\n'
                  % args.instance)
    return common.EXIT_OK


# -- argument parsing ------------------------------------------------------

def _common_options():
    """The options every command takes, before or after its name."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument(
        '--config-file', action='append', default=argparse.SUPPRESS,
        metavar='PATH',
        help='a nova.conf to read (repeatable, later files win); default: '
             'the bundled sample nova.conf')
    shared.add_argument(
        '--connection', default=argparse.SUPPRESS, metavar='URI',
        help='libvirt URI (qemu:///system, test:///path/host.xml); default: '
             'the bundled sample host')
    shared.add_argument(
        '--state-dir', default=argparse.SUPPRESS, metavar='DIR',
        help='where claims and emulated mdevs are kept; default: '
             '$XDG_STATE_HOME/nova-pci-mdev/<connection>')
    shared.add_argument('--format', choices=('table', 'json'),
                        default=argparse.SUPPRESS,
                        help='output format (default: table)')
    return shared


def build_parser():
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog='nova-pci-mdev', parents=[common],
        description='Mediated devices through Nova\'s PCI passthrough '
                    'framework: inspect a compute host, claim and release.',
        epilog='Exit codes: 0 ok, 1 request cannot be satisfied, 2 bad '
               'input or configuration, 3 host or state failure.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True

    def add(name, func, help_text):
        cmd = sub.add_parser(name, parents=[common], help=help_text,
                             description=help_text)
        cmd.set_defaults(func=func)
        return cmd

    add('check-config', cmd_check_config,
        'validate the configuration against the host; one line per problem')
    add('devices', cmd_devices,
        'every device: NUMA node -> parent -> slots/VFs, status, instance')
    add('pools', cmd_pools, 'the PCI stats pools with their free counts')
    add('inventory', cmd_inventory,
        'the Placement provider tree: providers, inventories, traits')
    claim = add('claim', cmd_claim,
                'fit a flavor\'s request, claim devices, create mdevs and '
                'print the guest hostdev XML')
    claim.add_argument('--extra-spec', action='append', default=[],
                       metavar='KEY=VALUE', required=True,
                       help='a flavor extra spec (repeatable), e.g. '
                            'pci_passthrough:alias=vGPU:1, '
                            'hw:pci_numa_affinity_policy=required, '
                            'hw:numa_nodes=1, resources:VGPU=1')
    claim.add_argument('--instance', metavar='UUID', default=None,
                       help='instance UUID (default: a new random one)')
    claim.add_argument('--dry-run', action='store_true', default=False,
                       help='show what would be claimed; change nothing')
    release = add('release', cmd_release, 'free every device of an instance')
    release.add_argument('--instance', metavar='UUID', required=True)
    live.add_commands(add)
    restore.add_commands(add)
    return parser


def run():
    """The ``nova-pci-mdev`` console script: :func:`main`, then exit."""
    return main()


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return common.EXIT_INVALID if exc.code else common.EXIT_OK
    # Global options may come before or after the command; argparse keeps
    # an absent one absent (SUPPRESS) so that neither position overrides
    # the other with a default.
    args.connection = getattr(args, 'connection', None) or (
        data.sample_connection_uri())
    args.config_file = getattr(args, 'config_file', None) or [
        data.SAMPLE_NOVA_CONF]
    args.state_dir = os.path.abspath(
        getattr(args, 'state_dir', None) or default_state_dir(args.connection))
    args.format = getattr(args, 'format', None) or 'table'
    common.register_objects()
    try:
        return _run(args, out, err)
    finally:
        _warn_left_out(args, err)
        compute = getattr(args, 'compute', None)
        if compute is not None:
            compute.close()


def _warn_left_out(args, err):
    """One warning line per node device discovery left out (unless the
    command reported them itself)."""
    compute = getattr(args, 'compute', None)
    if compute is not None and not getattr(args, 'left_out_shown', False):
        for problem in getattr(compute.host, 'left_out', ()):
            err.write('warning: %s\n' % problem)


def _run(args, out, err):
    try:
        return args.func(args, out)
    except exception.ConfigErrors as exc:
        for problem in exc.errors:
            err.write('%s: %s\n' % (getattr(problem, 'severity', 'error'),
                                    problem))
        return common.EXIT_INVALID
    except exception.RequestNotSatisfiable as exc:
        err.write('%s\n' % _described(exc))
        return common.EXIT_UNSATISFIED
    except exception.Invalid as exc:
        err.write('error: %s\n' % _described(exc))
        return common.EXIT_INVALID
    except exception.NovaPciMdevException as exc:
        err.write('host error: %s\n' % _described(exc))
        return common.EXIT_HOST
    except BrokenPipeError:
        # The reader went away (``| head``): nothing left to tell it.
        _silence(out)
        return common.EXIT_OK
    except OSError as exc:
        # Any filesystem error that escaped its module, named by path.
        err.write('host error: %s: %s\n' % (
            exc.filename or 'I/O', exc.strerror or exc))
        return common.EXIT_HOST


def _described(exc):
    """The error's message and its notes (what a failed rollback could
    not undo), on one line."""
    return '; '.join([str(exc)] + list(getattr(exc, '__notes__', ())))


def _silence(stream):
    """Point ``stream``'s descriptor at /dev/null so that the flush at
    exit does not fail again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == '__main__':
    sys.exit(run())
