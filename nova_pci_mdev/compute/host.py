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

Then every claimed slot gets its mdev (created if needed, all or nothing)
or vGPU type (NVIDIA VFs, :mod:`.nvidia.vgpu_vfs`), the devices are
allocated and the guest gets one ``<hostdev>`` each (:mod:`.claims`: the
pure pieces). A failure at any step leaves the store as it was and undoes
the host steps before it, raising the first error with a note per undo
that failed.

Views (:meth:`ComputeHost.snapshot`, :meth:`ComputeHost.provider_tree`,
:meth:`ComputeHost.live_move_source`) and dry runs only read the host: they
never create or remove an mdev (vanished allocated mdevs are recreated by
:meth:`ComputeHost.sync` and by every operation that may change the host).

Invariants: an instance is recorded in the store iff it holds devices;
``placement_held`` instances are those whose slots came through the
Placement path (their slots are not ``reserved`` in the provider tree).
"""

import contextlib
import dataclasses

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.compute import claims
from nova_pci_mdev.compute import live_move
from nova_pci_mdev.compute import synced
from nova_pci_mdev.objects import extra_info
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import pci_device as objects_pci
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import numa_fit
from nova_pci_mdev.pci import placement
from nova_pci_mdev.virt.libvirt import records as records_mod
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev_mod
from nova_pci_mdev.virt.libvirt.nvidia import vgpu_vfs

DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus


class _UsableDevices(object):
    """The whitelist, minus slots of a type their parent no longer exposes.

    Such slots (existing mdevs left over from an earlier configuration)
    stay visible to the tracker only while an instance holds them.
    """

    def __init__(self, whitelist):
        self._whitelist = whitelist
        self.pure = getattr(whitelist, 'pure', False)

    def match(self, dev):
        extra = (dev.get('extra_info') if isinstance(dev, dict)
                 else dev.stored('extra_info'))
        if extra_info.is_false(extra, extra_info.MDEV_EXPOSED):
            return None
        return self._whitelist.match(dev)


@dataclasses.dataclass
class Session:
    """One consistent view of the host inside a store transaction."""

    tx: object
    tracker: manager.PciDevTracker
    report: manager.SyncReport
    instances: dict
    unlisted: list        # records of devices no device spec covers
    recreated: object     # mdev.RecreateReport of this session's start
    host_problems: list = dataclasses.field(default_factory=list)
    vgpu_states: dict = dataclasses.field(default_factory=dict)


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
    #: UUIDs of allocated mdevs the host does not run (vanished after a
    #: reboot, or defined but stopped): a session that may change the
    #: host recreates them; a view only reports them.
    missing: tuple = ()


@dataclasses.dataclass(frozen=True)
class StoredView:
    """What the store says of a host whose last sync still holds
    (:meth:`ComputeHost.stored_view`): device rows sorted by address, the
    discovered records no device spec covers, the pools, the instance
    records, the amount held through the Placement path, the allocated
    mdevs the host does not run, and the last sync's host problems and
    vGPU states."""

    devices: list
    pools: object
    instances: dict
    unlisted: list
    placement_used: dict
    missing: tuple
    problems: list
    vgpu_states: dict


class _DryRun(Exception):
    """Unwinds a session so that its transaction rolls back."""


class ComputeHost(object):
    """A compute host: hypervisor, configuration, state and mdevs.

    :param host: a :class:`~.host.Host` (or :class:`~.emulated.EmulatedHost`)
    :param settings: :class:`nova_pci_mdev.conf.settings.Settings`
    :param store: :class:`nova_pci_mdev.store.sqlite.SqliteStore`
    :param mdevs: :class:`~.mdev.MdevManager` over the host's backend
    :param topology: the host's :class:`nova_pci_mdev.numa.HostTopology`
    :param vgpus: :class:`~.nvidia.vgpu_vfs.VgpuVfManager` (NVIDIA vGPU VFs)
    :param partial_loads: whether claims and releases may load only the
        device trees they touch (:meth:`session`); False loads every
        device in every session (the reference the tests hold the partial
        sessions to).
    """

    def __init__(self, host, settings, store, mdevs, topology, vgpus=None,
                 partial_loads=True):
        self.partial_loads = partial_loads
        self.vgpus = vgpus or vgpu_vfs.VgpuVfManager()
        self.host = host
        self.settings = settings
        self.store = store
        self.mdevs = mdevs
        self.topology = topology
        self.nodename = host.hostname
        self.root_uuid = placement.root_provider_uuid(self.nodename)
        self._whitelist = _UsableDevices(settings.whitelist)
        self._slots = records_mod.SlotFactory(self.nodename)

    def close(self):
        """Close the store (a second call does nothing); the host's libvirt
        connection stays with whoever opened it."""
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- the unit of work --------------------------------------------------

    @contextlib.contextmanager
    def session(self, change_host=True, narrow=None):
        """Load (the store's tables agree, :meth:`.store.rows.Transaction.
        load_state`), recreate, sync, yield a :class:`Session`, then save.

        With ``change_host`` allocated slots whose mdev vanished (host
        reboot) are recreated first, with the same UUID on the same parent,
        and allocated NVIDIA VFs get their vGPU type back; without it
        (views, dry runs) the host is only read. Either way a held slot the
        host does not list keeps its capacity (:meth:`.host.Host.discover`)
        and is never offered to anyone else. Then the tracker is synced
        with the host, when its input changed (:mod:`.synced`).

        ``narrow``: the devices the operation can touch, so that only
        their trees may be loaded (:meth:`_narrowed`).
        """
        if not self.partial_loads:
            narrow = None
        with self.store.transaction() as tx:
            if narrow is None:
                loaded, instances, busy = tx.load_state()
            else:
                instances, busy = tx.load_held()
                loaded = busy
            held = [d for d in busy if d.dev_type == DevType.MDEV_VF]
            recreated = self._recreate(change_host, loaded, held)
            slots = [claims.slot_of(d) for d in held]
            moved = claims.moved_mdevs(held)
            done = before = None
            if narrow is not None:
                done, loaded = self._narrowed(tx, narrow, busy, slots, moved)
                if done is None:
                    loaded, instances, busy = tx.load_state()
            tracker = manager.PciDevTracker(
                self._whitelist, self.topology, loaded,
                slot_factory=self._slots)
            if done is None:
                done = synced.bring_in_line(
                    tx, tracker, self.host, self.vgpus, self.settings,
                    slots, moved)
            else:
                before = tracker.stats.counts()
            yield Session(tx, tracker, done.report, instances,
                          done.unlisted, recreated, done.problems,
                          done.vgpu_states)
            if before is None:
                synced.save(tx, tracker)
            else:
                synced.save_part(tx, tracker, before)

    def _recreate(self, change_host, loaded, held):
        """Recreate vanished allocated mdevs and restore the vGPU types of
        allocated VFs (among ``loaded``) when ``change_host``."""
        if not change_host:
            return mdev_mod.RecreateReport([], {})
        return self.vgpus.restore_held(
            loaded, self.mdevs.recreate_vanished(
                [claims.slot_of(d) for d in held
                 if d.status == Status.ALLOCATED]))

    def _narrowed(self, tx, narrow, busy, slots, moved):
        """``(sync Outcome, devices)`` of a narrowed session, or ``(None,
        None)`` when it must load every device.

        ``narrow(busy devices)`` -> ``(SQL conditions, addresses)``: the
        devices an operation can touch (a claim: those its requests could
        take; a release: the instance's). When the last sync still holds
        (:func:`.synced.noted`) and the store records its pools, only the
        device trees that hold them are loaded
        (:meth:`.store.rows.Transaction.load_trees`), with every device in
        use, and the recorded pools are adjusted by what changed in them
        (:func:`.synced.save_part`): work in proportion to what the
        operation touches, not to the host.
        """
        conditions, addresses = narrow(busy)
        if conditions is None or tx.pools() is None:
            return None, None
        done = synced.noted(tx, busy, self.host, self.vgpus, self.settings,
                            slots, moved)
        if done is None:
            return None, None
        addresses = set(addresses) | {d.address for d in busy}
        return done, tx.load_trees(conditions, sorted(addresses))

    # -- read-only views ---------------------------------------------------

    def sync(self):
        """Sync with the hypervisor (recreating vanished allocated mdevs);
        returns ``(SyncReport, RecreateReport)`` (mdev UUIDs and VFs)."""
        with self.session() as s:
            return s.report, s.recreated

    def snapshot(self, tree=True):
        """A :class:`Snapshot` of the host after a sync; the host is only
        read (vanished mdevs are reported in ``missing``). ``tree=False``
        leaves the provider tree out (None)."""
        with self.session(change_host=False) as s:
            tracked = s.tracker.devices
            devices = sorted(tracked.values(), key=lambda d: d.address)
            unlisted = _unlisted(s.unlisted, tracked)
            return Snapshot(
                devices=devices, unlisted=unlisted,
                pools=s.tracker.stats.to_pool_list(),
                tree=self._tree(s) if tree else None,
                instances=dict(s.instances),
                placement_used=allocation.placement_used(
                    s.instances.values()),
                missing=claims.missing_mdevs(devices))

    def stored_view(self, devices=True):
        """What :meth:`snapshot` would show, read from the store without
        building a tracker, when the last sync applied what the host lists
        now (:func:`.synced.still_applied`); else None (then a session
        must sync: :meth:`snapshot`). ``devices`` are
        :class:`~nova_pci_mdev.store.rows.DeviceRow` objects (not
        validated, for display), ``unlisted`` the records no device spec
        covers; with ``devices=False`` neither is read. The host is only
        read; nothing is written.
        """
        with self.store.transaction(immediate=False) as tx:
            instances, busy = tx.load_held()
            held = [d for d in busy if d.dev_type == DevType.MDEV_VF]
            done = synced.still_applied(
                tx, self.host, self.vgpus, self.settings,
                [claims.slot_of(d) for d in held], claims.moved_mdevs(held))
            pools = tx.pools() if done is not None else None
            if pools is None:
                return None
            rows = tx.device_rows() if devices else []
        # The links a tracker gives its devices (capacity and the
        # provider tree read them: a PF used whole blocks its VFs' slots).
        table = device_table.DeviceTable()
        table.devs.update((d.address, d) for d in rows)
        table.relink()
        tracked = table.devs
        return StoredView(
            devices=rows, pools=pools, instances=instances,
            unlisted=_unlisted(done.unlisted, tracked) if devices else [],
            placement_used=allocation.placement_used(instances.values()),
            missing=claims.missing_mdevs(rows),
            problems=list(done.problems), vgpu_states=done.vgpu_states)

    def stored_tree(self, view):
        """The provider tree of a :meth:`stored_view` (as
        :meth:`provider_tree` builds it from a tracker)."""
        return placement.build_provider_tree(
            self.nodename, self.root_uuid, view.devices,
            placement_held=_placement_held(view.instances))

    def host_problems(self):
        """``(conf.host_checks problems, vGPU states read)`` after a
        read-only session's sync (none when the last sync's still holds:
        its problems are the note's)."""
        view = self.stored_view(devices=False)
        if view is not None:
            return view.problems, view.vgpu_states
        with self.session(change_host=False) as s:
            return list(s.host_problems), s.vgpu_states

    def _tree(self, s):
        return placement.build_provider_tree(
            self.nodename, self.root_uuid, s.tracker.devices.values(),
            placement_held=_placement_held(s.instances))

    def provider_tree(self):
        """The Placement provider tree; the host is only read."""
        with self.session(change_host=False) as s:
            return self._tree(s)

    # -- claims ------------------------------------------------------------

    def claim(self, instance_uuid, flavor, allocations=None, dry_run=False):
        """Fit, claim, create mdevs, allocate and record ``instance_uuid``.

        :param flavor: a :class:`nova_pci_mdev.compute.flavor.FlavorRequest`
        :param allocations: ``{provider uuid: {rc: amount}}`` from Placement
            for the flavor's ``resources`` groups; chosen locally when None.
        :param dry_run: compute everything, create and save nothing.
        """
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        narrow = None
        if not flavor.resource_groups:      # the alias path alone
            conditions = _request_conditions(flavor.pci_requests)
            narrow = lambda busy: (conditions, ())  # noqa: E731
        return self._unit(dry_run, lambda s: self.realise_devices(
            s, instance_uuid, flavor, self.choose_devices(
                s, instance_uuid, flavor, allocations), dry_run), narrow)

    def _unit(self, dry_run, work, narrow=None):
        """``work(session)`` in one session, rolled back if ``dry_run``."""
        result = None
        try:
            with self.session(change_host=not dry_run, narrow=narrow) as s:
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
        :class:`~.claims.Choice`."""
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
                    s.tracker, flavor.resource_groups, cells,
                    isolate=flavor.group_policy == 'isolate',
                    traits=flavor.trait_groups)
            for parent, amount in allocation.slots_for(
                    tree, s.tracker, allocations, self.root_uuid):
                # A failure on a later parent rolls the session back.
                devices.extend(s.tracker.claim_slots(consumer, parent,
                                                     amount))
        return claims.Choice(tuple(devices), cells, allocations or {})

    def realise_devices(self, s, consumer, flavor, choice, dry_run,
                        extra=None):
        """Second half: create the slots' mdevs, clear parents passed
        through whole, allocate, and record ``consumer`` (its record gets
        ``extra``'s keys too). Returns a ClaimResult.

        Each host step is all or nothing by itself; when a later step fails
        the earlier ones are undone (:meth:`_undone_on_failure`) and the
        first error is raised, carrying a note for every undo that failed.
        """
        devices = choice.devices
        hostdevs = tuple(claims.hostdev_for(d) for d in devices)
        created = removed = assigned = ()
        if devices and not dry_run:
            created = tuple(self.mdevs.ensure(
                [claims.slot_of(d) for d in devices
                 if d.dev_type == DevType.MDEV_VF]))
            with self._undone_on_failure(created, ()):   # before the guest
                assigned = tuple(self.vgpus.assign_devices(devices))
            with self._undone_on_failure(created, (), assigned):
                removed = self._clear_whole_parents(s, devices)
            with self._undone_on_failure(created, removed, assigned):
                s.tracker.allocate_instance(consumer)
                s.tx.save_instance(consumer,
                                   claims.record(flavor, choice, extra))
        return claims.ClaimResult(
            instance_uuid=consumer, devices=tuple(devices),
            numa_cells=claims.cell_ids(choice.cells),
            allocations=choice.allocations, hostdevs=hostdevs,
            created_mdevs=created,
            removed_mdevs=tuple(info.uuid for info in removed),
            dry_run=dry_run, vgpu_types_set=assigned)

    def _clear_whole_parents(self, s, devices):
        """A parent passed through whole cannot keep mdevs (the device is
        handed to the guest): remove its free ones (all or nothing);
        returns their MdevInfo for an undo."""
        whole = [d.address for d in devices if d.dev_type == DevType.MDEV_PF]
        if not whole:
            return ()
        return tuple(self.mdevs.clear_parents(whole, [
            d.address for held_by in s.tracker.instances()
            for d in s.tracker.devices_of(held_by)]))

    @contextlib.contextmanager
    def _undone_on_failure(self, created, removed, assigned=()):
        """On any failure inside: drop the vGPU types ``assigned``, remove
        the mdevs ``created``, recreate those ``removed``, re-raise it with
        a note (``rollback: ...``) per failed undo: none is lost."""
        try:
            yield
        except BaseException as exc:
            for failure in self.vgpus.undo(assigned) + self.mdevs.undo(
                    created, removed):
                exc.add_note('rollback: %s' % failure)
            raise

    # -- live moves (see nova_pci_mdev.compute.live_move) --------------------

    def live_move_source(self, instance_uuid):
        """The source side of a live move: a checked
        :class:`~.live_move.MoveSource` for the destination."""
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        with self.session(change_host=False) as s:
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

        mdevs stay on the host for the next instance (as in Nova), NVIDIA
        VFs lose their vGPU type first. An unknown instance frees nothing.
        """
        instance_uuid = names.normalize_uuid(instance_uuid, 'instance UUID')
        with self.session(narrow=lambda busy: ([], [
                d.address for d in busy
                if d.instance_uuid == instance_uuid])) as s:
            self.vgpus.clear_devices(s.tracker.devices_of(instance_uuid))
            freed = s.tracker.free_instance(instance_uuid)
            if instance_uuid in s.instances:
                s.tx.delete_instance(instance_uuid)
            return freed


#: The spec keys a claim's device trees are looked up by (lower case:
#: compared ignoring case, as the pools compare them).
_LOOKUP_KEYS = (('vendor_id', True), ('product_id', True),
                ('mdev_type', False))


def _request_conditions(requests):
    """The SQL conditions of the devices ``requests`` could take: per
    spec, the rows with its ``vendor_id``, ``product_id`` and
    ``mdev_type`` (those it names; a pool of slots still to create has
    its parent's). None when a spec names none of them: then any device
    could serve it."""
    conditions = []
    for request in requests:
        for spec in request.spec:
            where, args = [], []
            for key, any_case in _LOOKUP_KEYS:
                value = spec.get(key)
                if value is None:
                    continue
                where.append(('lower(%s) = ?' if any_case else '%s = ?')
                             % key)
                args.append(str(value).lower() if any_case else str(value))
            if not where:
                return None
            conditions.append((' AND '.join(where), tuple(args)))
    return conditions


def _placement_held(instances):
    """The instances (of ``{uuid: record}``) whose slots came through the
    Placement path."""
    return {uuid for uuid, rec in instances.items()
            if rec.get('allocations')}


def _unlisted(records, tracked):
    """The records no device spec covers (``records`` not in ``tracked``,
    a set or mapping of addresses) as devices sorted by address."""
    return sorted((objects_pci.PciDevice.create(rec) for rec in records
                   if rec['address'] not in tracked),
                  key=lambda d: d.address)
