"""Live moves: an instance's devices follow it to another compute host.

Nova's live migration, in this library's terms (the ``ComputeHost`` methods
named here delegate to this module)::

    source                         destination
    ------                         -----------
    live_move_source(instance)
      -> MoveSource  ------------> claim_live_move(migration, source, flavor)
                                     versions, movability, pinned claim,
                                     mdevs created, move recorded
                     <------------   -> LiveMoveClaim (mapping)
    claim.destination_xml(xml)
    libvirt migrates the guest
    success: release(instance)     confirm_move(migration, instance)
    abort / failure: (untouched)   release(migration)

The destination claims under the *migration* UUID, exactly like a cold move,
so the instance keeps its source devices until the source releases them,
and an abort frees only the destination. The claim asks for each device's
model (:mod:`nova_pci_mdev.pci.live_move`: an mdev slot of the same type; a
live-migratable device of the same vendor/product otherwise) under the
instance's NUMA policy, through the destination's own pools and NUMA
fitting; both hosts must meet Nova's libvirt/QEMU minimums for what moves
(:mod:`nova_pci_mdev.virt.libvirt.versions`).

Invariants: a refused move changes nothing on either host (every check
runs, and the claim is made, inside the destination's store transaction,
before any mdev is created); a granted one maps every source device to
exactly one destination device, and the destination XML differs from the
source XML only in those devices.
"""

import dataclasses

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.pci import live_move as pci_live_move
from nova_pci_mdev.virt.libvirt import migration
from nova_pci_mdev.virt.libvirt import versions as versions_mod

#: Key of the move in the destination's record of the migration.
RECORD_KEY = 'live_move'
_SOURCE_KEYS = ('instance_uuid', 'host', 'versions', 'devices')


def host_versions(host):
    """:class:`~.versions.HypervisorVersions` of a libvirt ``Host``."""
    return versions_mod.HypervisorVersions.from_libvirt(
        host.lib_version, host.hypervisor_type, host.hypervisor_version)


@dataclasses.dataclass(frozen=True)
class MoveSource:
    """What the source tells the destination (Nova's migrate data): the
    instance, the source host and what it runs, and the devices it holds
    (:class:`~nova_pci_mdev.pci.live_move.SourceDevice`, request by
    request)."""

    instance_uuid: str
    host: str
    versions: versions_mod.HypervisorVersions
    devices: tuple = ()

    def __post_init__(self):
        """An instance holds a device once: a device listed twice would
        get two destination devices and map to one of them."""
        seen = {}
        for index, dev in enumerate(self.devices):
            first = seen.setdefault(dev.address, index)
            if first != index:
                raise exception.InvalidValue(
                    field='move source devices[%d].address' % index,
                    value=dev.address,
                    rule='also devices[%d]: an instance holds a device '
                         'once' % first)

    def minimums(self):
        """The version minimums the devices need, mdevs' first."""
        out = []
        if any(d.is_mdev for d in self.devices):
            out.append(versions_mod.MDEV_LIVE_MIGRATION)
        if any(not d.is_mdev for d in self.devices):
            out.append(versions_mod.PCI_LIVE_MIGRATION)
        return out

    def to_dict(self):
        return {'instance_uuid': self.instance_uuid, 'host': self.host,
                'versions': self.versions.to_dict(),
                'devices': [d.to_dict() for d in self.devices]}

    @classmethod
    def from_dict(cls, data):
        """A MoveSource from :meth:`to_dict`'s form; InvalidValue names the
        first bad field."""
        if not isinstance(data, dict) or set(data) != set(_SOURCE_KEYS):
            raise exception.InvalidValue(
                field='move source', value=data,
                rule='expected an object with exactly the keys %s'
                     % ', '.join(_SOURCE_KEYS))
        host = data['host']
        if not isinstance(host, str) or not host:
            raise exception.InvalidValue(field='move source host',
                                         value=host,
                                         rule='expected a host name')
        devices = data['devices']
        if not isinstance(devices, list):
            raise exception.InvalidValue(field='move source devices',
                                         value=devices,
                                         rule='expected a list')
        return cls(
            instance_uuid=names.normalize_uuid(data['instance_uuid'],
                                               'instance UUID'),
            host=host,
            versions=versions_mod.HypervisorVersions.from_dict(
                data['versions']),
            devices=tuple(pci_live_move.SourceDevice.from_dict(
                d, 'devices[%d]' % i) for i, d in enumerate(devices)))


@dataclasses.dataclass(frozen=True)
class LiveMoveClaim:
    """The destination's answer: its claim for the migration and, per
    source device (mdev UUID or PCI address), the device replacing it."""

    migration_uuid: str
    instance_uuid: str
    source_host: str
    mapping: dict
    claim: object          # compute.ClaimResult of the migration

    @property
    def devices(self):
        return self.claim.devices

    def destination_xml(self, source_xml):
        """The source domain's XML with its devices moved (see
        :func:`nova_pci_mdev.virt.libvirt.migration.destination_xml`)."""
        return migration.destination_xml(source_xml, self.mapping)


def describe(compute, s, instance_uuid):
    """The :class:`MoveSource` of ``instance_uuid`` on ``compute`` (in
    session ``s``). Refuses devices that cannot move and a source too old
    for them, as Nova's source check does, before any destination is
    asked. An instance that holds nothing here moves without devices
    (an empty MoveSource), as in Nova."""
    record = s.instances.get(instance_uuid) or {}
    sources = pci_live_move.source_devices(
        s.tracker.devices_of(instance_uuid), record.get('devices') or (),
        s.tracker.tags_of, record.get('pci_requests') or ())
    source = MoveSource(instance_uuid=instance_uuid, host=compute.nodename,
                        versions=host_versions(compute.host),
                        devices=tuple(sources))
    _check(source, [('source', source.host, source.versions)])
    return source


def _what(source, destination=None):
    what = 'instance %s from host %s' % (source.instance_uuid, source.host)
    return what + (' to host %s' % destination if destination else '')


def _check(source, hosts, destination=None):
    problems = pci_live_move.movability_problems(source.devices)
    problems += versions_mod.problems(hosts, source.minimums())
    if problems:
        raise exception.LiveMigrationRefused(
            what=_what(source, destination), reason='; '.join(problems))


def _types_filter(source):
    """Keep the child providers whose parent exposes a type the source's
    Placement-path slots (mdevs, vGPU VFs) have (the local stand-in for
    Placement)."""
    wanted = {d.mdev_type for d in source.devices
              if d.mdev_type is not None and d.request is None}
    return lambda parent: parent.mdev_type in wanted


def claim(compute, s, migration_uuid, source, flavor, allocations, dry_run):
    """Claim on ``compute`` (the destination) for ``source``; returns a
    :class:`LiveMoveClaim`. See the module docstring for the rules."""
    if source.host == compute.nodename:
        raise exception.InvalidValue(
            field='move source host', value=source.host,
            rule='a live move goes to another host')
    if source.instance_uuid in s.instances or s.tracker.devices_of(
            source.instance_uuid):
        raise exception.InvalidValue(
            field='instance', value=source.instance_uuid,
            rule='already holds devices on destination host %s'
                 % compute.nodename)
    _check(source, [('source', source.host, source.versions),
                    ('destination', compute.nodename,
                     host_versions(compute.host))], compute.nodename)
    pinned, groups = pci_live_move.destination_requests(
        flavor.pci_requests, source.devices)
    choice = compute.choose_devices(
        s, migration_uuid,
        dataclasses.replace(flavor, pci_requests=tuple(pinned)),
        allocations, parents=_types_filter(source))
    count = sum(len(g.sources) for g in groups if g.request is not None)
    mapping = pci_live_move.pair(groups, choice.devices[:count],
                                 choice.devices[count:])
    result = compute.realise_devices(
        s, migration_uuid, flavor, choice, dry_run, extra={RECORD_KEY: {
            'instance_uuid': source.instance_uuid,
            'source_host': source.host, 'mapping': mapping}})
    return LiveMoveClaim(migration_uuid=migration_uuid,
                         instance_uuid=source.instance_uuid,
                         source_host=source.host, mapping=mapping,
                         claim=result)
