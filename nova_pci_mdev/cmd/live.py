"""The live-move commands of ``nova-pci-mdev``: check a planned move.

On the source host, the document of what the instance holds (``--format
json``; the table shows the same)::

    nova-pci-mdev --format json live-move-source --instance UUID > move.json

On a candidate destination, a dry run of its claim: which device would
replace each source device, on which NUMA cells, or why the move is refused
(exit 1: versions, types, room, NUMA policy); with ``--domain-xml`` also the
guest XML the destination would get::

    nova-pci-mdev live-move-check --source move.json \\
        --extra-spec pci_passthrough:alias=vGPU:1 [--domain-xml guest.xml]

Nothing changes on either host. Errors follow the CLI's exit codes (a file
that cannot be read or is not a move document: 2).
"""

import uuid as uuid_lib

from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev import names
from nova_pci_mdev.cmd import common


def _read(option, path):
    try:
        return input_files.read_text(path)
    except input_files.NotAnInputFile as exc:
        raise exception.InvalidValue(field=option, value=path,
                                     rule=str(exc))
    except (OSError, UnicodeError) as exc:
        raise exception.InvalidValue(field=option, value=path,
                                     rule='cannot be read: %s' % exc)


def _load_source(path):
    from nova_pci_mdev.compute import live_move
    try:
        data = input_files.parse_json(_read('--source', path))
    except ValueError as exc:
        raise exception.InvalidValue(
            field='--source', value=path,
            rule='is not JSON (%s); write it with --format json '
                 'live-move-source' % exc)
    return live_move.MoveSource.from_dict(data)


def cmd_live_move_source(args, out):
    from nova_pci_mdev.cmd import render
    args.instance = names.normalize_uuid(args.instance, '--instance')
    compute = common.build_compute_host(args, common.load_settings(args))
    source = compute.live_move_source(args.instance)
    if args.format == 'json':
        out.write(render.to_json(source.to_dict()) + '\n')
        return common.EXIT_OK
    out.write('instance %s on host %s (%s) holds %d device(s), all of '
              'them live-migratable\n' % (
                  source.instance_uuid, source.host, source.versions,
                  len(source.devices)))
    rows = [(d.address, d.dev_type, d.mdev_type, d.alias,
             d.live_migratable) for d in source.devices]
    out.write(render.table(('address', 'dev_type', 'mdev_type', 'alias',
                            'live_migratable'), rows) + '\n')
    return common.EXIT_OK


def cmd_live_move_check(args, out):
    from nova_pci_mdev.cmd import render
    from nova_pci_mdev.compute import flavor as flavor_mod
    settings = common.load_settings(args)
    source = _load_source(args.source)
    flavor = flavor_mod.parse(flavor_mod.specs_from_pairs(args.extra_spec),
                              settings.aliases)
    xml = _read('--domain-xml', args.domain_xml) if args.domain_xml else None
    compute = common.build_compute_host(args, settings)
    moved = compute.claim_live_move(str(uuid_lib.uuid4()), source, flavor,
                                    dry_run=True)
    # The rewrite raises like the claim: a mismatch is a refusal.
    dest_xml = moved.destination_xml(xml) if xml is not None else None
    devices = {d.address: d for d in moved.devices}
    if args.format == 'json':
        out.write(render.to_json({
            'instance_uuid': source.instance_uuid,
            'source_host': source.host, 'destination_host': compute.nodename,
            'numa_cells': moved.claim.numa_cells,
            'mapping': moved.mapping,
            'devices': [render.device_dict(d) for d in moved.devices],
            'domain_xml': dest_xml}) + '\n')
        return common.EXIT_OK
    out.write('instance %s can move from host %s to host %s%s\n' % (
        source.instance_uuid, source.host, compute.nodename,
        '' if moved.claim.numa_cells is None else
        ' on NUMA cell(s) %s' % ','.join(map(str, moved.claim.numa_cells))))
    rows = [(src, dst, devices[dst].dev_type, devices[dst].mdev_type,
             devices[dst].numa_node) for src, dst in moved.mapping.items()]
    out.write(render.table(('source', 'destination', 'dev_type',
                            'mdev_type', 'numa_node'), rows) + '\n')
    if dest_xml is not None:
        out.write('destination guest XML:\n%s\n' % dest_xml)
    return common.EXIT_OK


def add_commands(add):
    """Register the commands with ``add(name, func, help)`` (cmd/cli.py's)."""
    source = add('live-move-source', cmd_live_move_source,
                 'on the source: what a live move of an instance must '
                 'carry (JSON with --format json)')
    source.add_argument('--instance', metavar='UUID', required=True)
    check = add('live-move-check', cmd_live_move_check,
                'on a destination: would it take a live move (dry run)')
    check.add_argument('--source', metavar='PATH', required=True,
                       help='the JSON of live-move-source on the source')
    check.add_argument('--extra-spec', action='append', default=[],
                       metavar='KEY=VALUE', required=True,
                       help="the instance's flavor extra specs (repeatable)")
    check.add_argument('--domain-xml', metavar='PATH', default=None,
                       help="the guest's domain XML on the source "
                            "(virsh dumpxml --migratable): print it as the "
                            "destination would get it")
