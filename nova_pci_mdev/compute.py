"""One compute host's PCI and mdev service: resources, claims, spawn.

:class:`ComputeHost` joins the pieces DESIGN section 4 describes: the libvirt
adapter (``host``: discovery and NUMA topology), the validated
configuration (``settings``), the state store, the tracker and the mdev
lifecycle. It holds no device state of its own: every operation is one
:meth:`ComputeHost.session`, i.e. one store transaction in which a tracker
is loaded, synced with the hypervisor, used, and saved. Two processes on one
state directory therefore never hand out the same device.

The two request paths end in the same tracker:

* **alias path**: ``pci_passthrough:alias`` requests are fitted to the
  host's NUMA cells (``hw:numa_nodes``, ``hw:pci_numa_affinity_policy``)
  and claimed from the pools;
* **Placement path**: an allocation on a parent's provider (from a real
  Placement, or chosen locally by
  :func:`nova_pci_mdev.pci.allocation.local_allocations` when there is
  none) becomes slots of that parent claimed in the tracker.

Then every claimed slot gets its mdev (created if needed, all or nothing),
the devices are allocated, and the guest gets one ``<hostdev>`` each. A
failure at any step leaves the store as it was and no mdev created by the
failed step behind.

Invariants: an instance is recorded in the store iff it holds devices;
``placement_held`` instances are those whose slots came through the
Placement path (their slots are not ``reserved`` in the provider tree).
"""

import contextlib
import dataclasses
import uuid as uuid_lib

from nova_pci_mdev import exception
from nova_pci_mdev import live_move
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device as objects_pci
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import numa_fit
from nova_pci_mdev.pci import placement
from nova_pci_mdev.virt.libvirt import config as vconfig

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus

ROOT_NAMESPACE = uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS,
                                'compute-nodes.nova-pci-mdev')


class _UsableDevices(object):
    """The whitelist, minus slots of a type their parent no longer exposes.

    Such slots (existing mdevs left over from an earlier configuration)
    stay visible to the tracker only while an instance holds them.
    """

    def __init__(self, whitelist):
        self._whitelist = whitelist

    def match(self, dev):
        extra = (dev.get('extra_info') if isinstance(dev, dict)
                 else (dev.extra_info if 'extra_info' in dev else None))
        if extra and extra.get('mdev_exposed') == 'false':
            return None
        return self._whitelist.match(dev)


@dataclasses.dataclass
class Session:
    """One consistent view of the host inside a store transaction."""

    tx: object
    tracker: manager.PciDevTracker
    report: manager.SyncReport
    instances: dict
    records: list
    recreated: object     # mdev.RecreateReport of this session's start


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What the host holds, for display: tracked devices sorted by address,
    discovered devices the tracker does not use (not whitelisted), pools,
    the provider tree, the instance records, and per provider the amount
    held through the Placement path."""

    devices: list
    unlisted: list
    pools: object
    tree: object
    instances: dict
    placement_used: dict


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    instance_uuid: str
    devices: tuple           # PciDevice objects, in request order
    numa_cells: tuple | None  # HostCell ids the instance was fitted to
    allocations: dict        # provider uuid -> {rc: amount}
    hostdevs: tuple          # LibvirtConfigGuestHostdev* objects
    created_mdevs: tuple     # UUIDs of mdevs this claim created
    removed_mdevs: tuple = ()  # UUIDs of free mdevs of parents used whole
    dry_run: bool = False

    def devices_xml(self):
        """The guest's ``<devices>`` element with one hostdev per device."""
        return vconfig.devices_xml(self.hostdevs)


@dataclasses.dataclass(frozen=True)
class Choice:
    """Devices a claim took in the tracker (alias path first, then the
    Placement path's slots), the NUMA cells and the allocations."""

    devices: tuple
    cells: tuple | None
    allocations: dict


class _DryRun(Exception):
    """Unwinds a session so that its transaction rolls back."""


def _slot(dev):
    """The (uuid, parent, type) an mdev slot device stands for."""
    return (dev.address, dev.parent_addr, dev.mdev_type)


def root_provider_uuid(nodename):
    return str(uuid_lib.uuid5(ROOT_NAMESPACE, nodename))


def hostdev_for(dev):
    """The guest hostdev config of one claimed device."""
    if dev.dev_type == DevType.MDEV_VF:
        return vconfig.LibvirtConfigGuestHostdevMDEV(uuid=dev.address)
    if not names.is_pci_address(dev.address):
        raise exception.InvalidValue(
            field='device', value=dev.address,
            rule='a virtual mdev parent cannot be passed through whole')
    return vconfig.LibvirtConfigGuestHostdevPCI(address=dev.address)


class ComputeHost(object):
    """A compute host: hypervisor, configuration, state and mdevs.

    :param host: a :class:`~.host.Host` (or :class:`~.emulated.EmulatedHost`)
    :param settings: :class:`nova_pci_mdev.conf.settings.Settings`
    :param store: :class:`nova_pci_mdev.store.SqliteStore`
    :param mdevs: :class:`~.mdev.MdevManager` over the host's backend
    :param topology: the host's :class:`nova_pci_mdev.numa.HostTopology`
    """

    def __init__(self, host, settings, store, mdevs, topology):
        self.host = host
        self.settings = settings
        self.store = store
        self.mdevs = mdevs
        self.topology = topology
        self.nodename = host.hostname
        self.root_uuid = root_provider_uuid(self.nodename)
        self._whitelist = _UsableDevices(settings.whitelist)

    # -- the unit of work --------------------------------------------------

    @contextlib.contextmanager
    def session(self):
        """Load, recreate, sync, yield a :class:`Session`, then save.

        Allocated slots whose mdev vanished (host reboot) are recreated
        first, with the same UUID on the same parent, so that their
        capacity is never offered to anyone else; only then is the host
        discovered and the tracker synced. An exception rolls it all back.
        """
        with self.store.transaction() as tx:
            loaded = tx.load_devices()
            held = [d for d in loaded if d.dev_type == DevType.MDEV_VF
                    and d.status in (Status.CLAIMED, Status.ALLOCATED)]
            recreated = self.mdevs.recreate_vanished(
                [_slot(d) for d in held if d.status == Status.ALLOCATED])
            records = self.host.discover(self.settings,
                                         held=[_slot(d) for d in held])
            tracker = manager.PciDevTracker(self._whitelist, self.topology,
                                            loaded)
            report = tracker.sync(records)
            yield Session(tx, tracker, report, tx.instances(), records,
                          recreated)
            changed, deleted = tracker.pop_changes()
            tx.save_devices(changed)
            tx.delete_devices(deleted)

    # -- read-only views ---------------------------------------------------

    def sync(self):
        """Sync with the hypervisor (recreating vanished allocated mdevs).

        Returns ``(SyncReport, RecreateReport)``.
        """
        with self.session() as s:
            return s.report, s.recreated

    def snapshot(self):
        """A :class:`Snapshot` of the host after a sync."""
        with self.session() as s:
            tracked = s.tracker.devices
            devices = sorted(tracked.values(), key=lambda d: d.address)
            unlisted = sorted(
                (objects_pci.PciDevice.create(rec) for rec in s.records
                 if rec['address'] not in tracked),
                key=lambda d: d.address)
            used = {}
            for rec in s.instances.values():
                for prov, res in (rec.get('allocations') or {}).items():
                    for rc, amount in res.items():
                        key = (prov, rc)
                        used[key] = used.get(key, 0) + amount
            return Snapshot(devices=devices, unlisted=unlisted,
                            pools=s.tracker.stats.to_pool_list(),
                            tree=self._tree(s), instances=dict(s.instances),
                            placement_used=used)

    def _placement_held(self, s):
        return {uuid for uuid, rec in s.instances.items()
                if rec.get('allocations')}

    def _tree(self, s):
        return placement.build_provider_tree(
            self.nodename, self.root_uuid, s.tracker.devices.values(),
            placement_held=self._placement_held(s))

    def provider_tree(self):
        with self.session() as s:
            return self._tree(s)

    # -- claims ------------------------------------------------------------

    def claim(self, instance_uuid, flavor, allocations=None, dry_run=False):
        """Fit, claim, create mdevs, allocate and record ``instance_uuid``.

        :param flavor: a :class:`nova_pci_mdev.flavor.FlavorRequest`
        :param allocations: ``{provider uuid: {rc: amount}}`` from Placement
            for the flavor's ``resources`` groups; chosen locally when None.
        :param dry_run: compute everything, create and save nothing.
        """
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        return self._unit(dry_run, lambda s: self.realise_devices(
            s, instance_uuid, flavor, self.choose_devices(
                s, instance_uuid, flavor, allocations), dry_run))

    def _unit(self, dry_run, work):
        """``work(session)`` in one session, rolled back if ``dry_run``."""
        result = None
        try:
            with self.session() as s:
                result = work(s)
                if dry_run:
                    raise _DryRun()
        except _DryRun:
            pass
        return result

    def choose_devices(self, s, consumer, flavor, allocations,
                       parents=None):
        """First half of a claim: fit the NUMA cells, claim the devices in
        the tracker (alias path first, then Placement's slots); nothing
        exists or is recorded yet. ``parents(parent device)`` limits the
        providers a local Placement choice may use. Returns a
        :class:`Choice`."""
        if consumer in s.instances or s.tracker.devices_of(consumer):
            raise exception.InvalidValue(
                field='instance', value=consumer,
                rule='already holds devices on this host; release it first')
        cells = numa_fit.fit_instance(self.topology, flavor.numa_nodes,
                                      flavor.pci_requests, s.tracker.stats)
        devices = list(s.tracker.claim_instance(
            consumer, flavor.pci_requests, cells))
        if flavor.resource_groups:
            tree = self._tree(s)
            if allocations is None:
                allocations = allocation.local_allocations(
                    allocation.only_parents(tree, s.tracker, parents),
                    s.tracker, flavor.resource_groups, cells)
            devices.extend(s.tracker.claim_devices(
                consumer, allocation.slots_for(
                    tree, s.tracker, allocations, self.root_uuid),
                request_id=None))
        return Choice(tuple(devices), cells, allocations or {})

    def realise_devices(self, s, consumer, flavor, choice, dry_run,
                        extra=None):
        """Second half: create the slots' mdevs (all or nothing), clear
        parents passed through whole, allocate, and record ``consumer``
        (its record gets ``extra``'s keys too). Returns a ClaimResult."""
        devices, cells = choice.devices, choice.cells
        slots = [_slot(d) for d in devices if d.dev_type == DevType.MDEV_VF]
        hostdevs = tuple(hostdev_for(d) for d in devices)
        # A parent passed through whole cannot keep mdevs (the device is
        # handed to the guest): its free ones are removed, and recreated if
        # the claim fails.
        whole = [d.address for d in devices if d.dev_type == DevType.MDEV_PF]
        created = removed = ()
        if devices and not dry_run:
            # All or nothing: ensure() removes what it created when one
            # creation fails; the transaction then rolls the claim back.
            created = tuple(self.mdevs.ensure(slots))
            try:
                if whole:
                    removed = tuple(self.mdevs.clear_parents(whole, [
                        d.address for held_by in s.tracker.instances()
                        for d in s.tracker.devices_of(held_by)]))
                s.tracker.allocate_instance(consumer)
                s.tx.save_instance(consumer, dict(
                    extra or {},
                    numa_cells=[c.id for c in cells] if cells else None,
                    allocations=choice.allocations,
                    devices=[d.address for d in devices],
                    pci_requests=[r.alias_name for r in flavor.pci_requests]))
            except Exception:
                for uuid in created:
                    self.mdevs.remove_unassigned(uuid, ())
                self.mdevs.restore(removed)
                raise
        return ClaimResult(
            instance_uuid=consumer, devices=tuple(devices),
            numa_cells=tuple(c.id for c in cells) if cells else None,
            allocations=choice.allocations, hostdevs=hostdevs,
            created_mdevs=created,
            removed_mdevs=tuple(info.uuid for info in removed),
            dry_run=dry_run)

    # -- live moves (see nova_pci_mdev.live_move) ---------------------------

    def live_move_source(self, instance_uuid):
        """The source side of a live move: a checked
        :class:`~.live_move.MoveSource` for the destination."""
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        with self.session() as s:
            return live_move.describe(self, s, instance_uuid)

    def claim_live_move(self, migration_uuid, source, flavor,
                        allocations=None, dry_run=False):
        """The destination side: claim (for ``migration_uuid``) and create
        what replaces ``source``'s devices; a :class:`~.live_move.
        LiveMoveClaim`. A refusal changes nothing. Then ``confirm_move``
        or ``release``, as for a cold move."""
        migration_uuid = names.normalize_uuid(migration_uuid,
                                              'migration UUID')
        return self._unit(dry_run, lambda s: live_move.claim(
            self, s, migration_uuid, source, flavor, allocations, dry_run))

    def confirm_move(self, migration_uuid, instance_uuid):
        """The devices claimed for a move become the instance's.

        A resize or cold migration claims on the destination under the
        migration UUID (``claim(migration_uuid, new_flavor)``; the instance
        may still hold its old devices on this very host). Confirm: the
        source calls ``release(instance_uuid)``, then the destination calls
        this, which hands the migration's devices (status and request ids
        kept, mdevs untouched) and its record to the instance in one
        transaction. Revert: ``release(migration_uuid)`` on the
        destination. Returns the devices handed over ([] for a move to a
        flavor without devices: the migration holds nothing here).
        """
        migration_uuid = names.normalize_uuid(migration_uuid,
                                              'migration UUID')
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        with self.session() as s:
            if (instance_uuid in s.instances
                    or s.tracker.devices_of(instance_uuid)):
                raise exception.InvalidValue(
                    field='instance', value=instance_uuid,
                    rule='still holds devices on this host; release the '
                         'source side of the move first')
            record = s.instances.get(migration_uuid)
            moved = s.tracker.transfer(migration_uuid, instance_uuid)
            if record is not None:
                s.tx.delete_instance(migration_uuid)
                s.tx.save_instance(instance_uuid, {
                    k: v for k, v in record.items()
                    if k != live_move.RECORD_KEY})
            return moved

    def release(self, instance_uuid):
        """Free every device of ``instance_uuid``; returns the freed ones.

        mdevs stay on the host for the next instance (as in Nova). An
        unknown instance frees nothing.
        """
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        with self.session() as s:
            freed = s.tracker.free_instance(instance_uuid)
            if instance_uuid in s.instances:
                s.tx.delete_instance(instance_uuid)
            return freed
