"""A tiny cloud over simulated compute hosts: the life of an instance.

:class:`Cloud` plays Nova's API and conductor over
:class:`~.harness.SimHost`s; everything a host knows comes from the product
(``ComputeHost.claim``/``release``/``snapshot``), scheduling is
:mod:`.scheduler`'s. Every guest (boot, move, evacuation) is validated by
the real libvirt (:class:`~.harness.GuestValidator`) before it is defined
on its host. After each change a host *reports* (:meth:`Cloud.report`): its
pools go to the scheduler, its provider tree to Placement.

Bookkeeping the checks compare with the hosts (:mod:`.checks`):
``held[host][consumer] = addresses`` and ``domains[host][instance] =
guest``. Moves (resize, cold migration) claim on the destination under the
*migration* UUID, because ``ComputeHost.claim`` refuses an instance that
already holds devices on the host (a same-host resize); confirm hands that
claim to the instance with ``ComputeHost.confirm_move``, revert releases
it. Evacuation claims under the instance UUID on the destination without
contacting the source; the source drops the stale claim when it comes back
(:meth:`Cloud.host_up`, Nova's init_host).
"""

import dataclasses
import os
import uuid as uuid_lib

import fixtures

from nova_pci_mdev import conf as conf_mod
from nova_pci_mdev import objects
from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.tests.fixtures import placement as placement_fixture
from nova_pci_mdev.tests.functional import harness
from nova_pci_mdev.tests.functional import scheduler
from nova_pci_mdev.virt.libvirt import config as vconfig

PROJECT = scheduler.PROJECT
USER = scheduler.USER
NoValidHost = scheduler.NoValidHost
ACTIVE = 'ACTIVE'
VERIFY_RESIZE = 'VERIFY_RESIZE'
MIGRATING = 'MIGRATING'
LIVE_MIGRATION = 'live-migration'


@dataclasses.dataclass
class Migration:
    uuid: str
    kind: str                 # 'resize' | 'migration' | 'live-migration'
    source: str
    dest: str
    specs: dict
    flavor: object
    devices: tuple = ()
    allocations: dict = dataclasses.field(default_factory=dict)
    numa_cells: tuple = None
    guest: object = None


@dataclasses.dataclass
class Instance:
    uuid: str
    specs: dict
    flavor: object
    host: str = None
    devices: tuple = ()
    allocations: dict = dataclasses.field(default_factory=dict)
    numa_cells: tuple = None
    guest: object = None
    status: str = ACTIVE
    migration: Migration = None

    @property
    def name(self):
        return 'instance-%s' % self.uuid


class Cloud(fixtures.Fixture):
    """Compute hosts, a scheduler and (optionally) a real Placement.

    :param nova_conf: nova.conf text shared by the hosts and the API (the
        aliases a flavor may name).
    :param placement: run the real Placement in process and report every
        host's provider tree to it.
    """

    def __init__(self, nova_conf, placement=False):
        super().__init__()
        self.nova_conf = nova_conf
        self.use_placement = placement

    def _setUp(self):
        objects.register_all()
        self.base = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(self.base, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(self.nova_conf)
        self.settings = conf_mod.load_settings(conf_mod.new_config([path]))
        self.validator = harness.GuestValidator()
        self.addCleanup(self.validator.close)
        self.placement = self.client = None
        if self.use_placement:
            self.placement = self.useFixture(
                placement_fixture.PlacementFixture())
            self.client = self.placement.client
        self.hosts = {}
        self.instances = {}
        self.held = {}
        self.domains = {}
        self.evacuated = {}
        self.pools = {}
        self.providers = {}       # provider uuid -> host name
        self.reported = {}        # host name -> provider tree in Placement
        self.scheduler = scheduler.Scheduler(self)

    # -- hosts -------------------------------------------------------------

    def add_host(self, fake, hypervisor=harness.FAKE, nova_conf=None):
        """Start the compute host ``fake`` describes; it reports once.

        ``nova_conf``: the host's own nova.conf text (default: the
        cloud's), e.g. a device_spec that differs from the other hosts'.
        """
        name = fake.hostname
        if name in self.hosts:
            raise ValueError('host %s added twice' % name)
        state_dir = os.path.join(self.base, 'hosts', name)
        os.makedirs(state_dir)
        settings = self.settings
        if nova_conf is not None:
            path = os.path.join(state_dir, 'nova.conf')
            with open(path, 'w') as handle:
                handle.write(nova_conf)
            settings = conf_mod.load_settings(conf_mod.new_config([path]))
        sim = harness.SimHost(name, fake, settings, state_dir, hypervisor)
        self.addCleanup(sim.stop)
        self.hosts[name] = sim
        self.held[name] = {}
        self.domains[name] = {}
        sim.start()
        self.report(sim)
        return sim

    def report(self, sim):
        """What a compute host's periodic task does: refresh the
        scheduler's view (pools) and Placement (provider tree)."""
        snap = sim.compute.snapshot()
        self.pools[sim.name] = snap.pools
        for prov in snap.tree.providers:
            self.providers[prov.uuid] = sim.name
        # Like Nova's report client, push the tree only when it changed.
        if self.client is not None and self.reported.get(
                sim.name) != snap.tree:
            self.client.sync_tree(snap.tree)
            self.reported[sim.name] = snap.tree
        return snap

    def host_down(self, name):
        self.hosts[name].crash()

    def host_up(self, name, rebooted=False):
        """The host comes back (after a reboot if ``rebooted``); like
        Nova's init_host it drops what evacuated instances left behind."""
        sim = self.hosts[name]
        if rebooted:
            sim.reboot()
        else:
            sim.start()
        for uuid in sorted(self.evacuated.pop(name, ())):
            sim.compute.release(uuid)
            self.held[name].pop(uuid, None)
            sim.undefine_domain(Instance(uuid, {}, None).name)
            self.domains[name].pop(uuid, None)
            if self.client is not None:
                self._drop_host_allocations(uuid, name)
        self.report(sim)
        return sim

    def reboot_host(self, name):
        """Reboot a host; returns the RecreateReport of its first sync."""
        sim = self.hosts[name]
        _report, recreated = sim.reboot()
        self.report(sim)
        return recreated

    def restart_service(self, name):
        """Restart a compute service. Like Nova's init_host, a source that
        finds an instance of its own in a live migration aborts the
        migration: the destination frees its claim, the instance stays."""
        sim = self.hosts[name]
        sim.restart_service()
        for inst in sorted(self.instances.values(), key=lambda i: i.uuid):
            if (inst.host == name and inst.migration is not None and
                    inst.migration.kind == LIVE_MIGRATION):
                self.abort_live_migration(inst)
        self.report(sim)
        return sim

    def _drop_host_allocations(self, consumer, name):
        """Remove host ``name``'s providers from the consumer's
        allocations (what Nova does for an evacuated instance)."""
        current = self.client.get_allocations(consumer)
        keep = {rp: a for rp, a in current['allocations'].items()
                if self.providers.get(rp) != name}
        if keep != current['allocations']:
            scheduler.put_allocations(self.client, consumer, current,
                                      replace=keep)

    # -- spawning ------------------------------------------------------------

    def _spawn(self, sim, inst, consumer, result):
        guest = vconfig.LibvirtConfigGuest(
            name=inst.name, uuid=inst.uuid, memory_kb=1048576, vcpus=1,
            devices=list(result.hostdevs))
        try:
            self.validator.validate(guest)
        except harness.GuestXMLInvalid:
            sim.compute.release(consumer)
            if self.client is not None and result.allocations:
                self.client.delete_allocations(consumer)
            self.report(sim)
            raise
        sim.define_domain(guest.to_xml())
        self.domains[sim.name][inst.uuid] = guest
        self.held[sim.name][consumer] = tuple(d.address
                                              for d in result.devices)
        return guest

    # -- the instance API ----------------------------------------------------

    def parse(self, specs):
        return flavor_mod.parse(dict(specs), self.settings.aliases)

    def boot(self, specs, host=None):
        """Boot an instance of a flavor with extra ``specs``."""
        flavor = self.parse(specs)
        inst = Instance(uuid=str(uuid_lib.uuid4()), specs=dict(specs),
                        flavor=flavor)
        sim, result = self.scheduler.schedule(
            inst.uuid, 'instance %s' % inst.uuid, flavor, force=host)
        inst.guest = self._spawn(sim, inst, inst.uuid, result)
        inst.host = sim.name
        inst.devices = tuple(d.address for d in result.devices)
        inst.allocations = result.allocations
        inst.numa_cells = result.numa_cells
        self.instances[inst.uuid] = inst
        self.report(sim)
        return inst

    def delete(self, inst):
        if inst.migration is not None:
            self._roll_back(inst, inst.migration.kind)
        sim = self.hosts[inst.host]
        sim.compute.release(inst.uuid)
        sim.undefine_domain(inst.name)
        self.held[sim.name].pop(inst.uuid, None)
        self.domains[sim.name].pop(inst.uuid, None)
        if self.client is not None:
            self.client.delete_allocations(inst.uuid)
        del self.instances[inst.uuid]
        self.report(sim)

    def resize(self, inst, specs, host=None):
        return self._move(inst, 'resize', specs, host)

    def migrate(self, inst, host=None):
        """Cold migration: the same flavor on another host."""
        return self._move(inst, 'migration', inst.specs, host)

    def _move(self, inst, kind, specs, host):
        if inst.status != ACTIVE:
            raise ValueError('instance %s is %s' % (inst.uuid, inst.status))
        flavor = self.parse(specs)
        mig = Migration(uuid=str(uuid_lib.uuid4()), kind=kind,
                        source=inst.host, dest=None, specs=dict(specs),
                        flavor=flavor)
        # Nova's default allow_resize_to_same_host=False; a forced host
        # may be the source.
        sim, result = self.scheduler.schedule(
            mig.uuid, '%s %s of instance %s' % (kind, mig.uuid, inst.uuid),
            flavor, exclude=(inst.host,), force=host)
        mig.dest = sim.name
        mig.guest = self._spawn(sim, inst, mig.uuid, result)
        mig.devices = tuple(d.address for d in result.devices)
        mig.allocations = result.allocations
        mig.numa_cells = result.numa_cells
        inst.migration = mig
        inst.status = VERIFY_RESIZE
        self.report(sim)
        return mig

    def live_migrate(self, inst, host=None):
        """Start a live migration of ``inst``; returns its Migration.

        The source describes the instance's devices
        (``ComputeHost.live_move_source``), the scheduler picks a
        destination that claims them for the migration
        (``claim_live_move``, a refusal reschedules), the source's domain
        XML is rewritten for the destination's devices, validated by the
        real libvirt and defined there. The instance then runs on both
        hosts until :meth:`complete_live_migration` or
        :meth:`abort_live_migration`.
        """
        if inst.status != ACTIVE:
            raise ValueError('instance %s is %s' % (inst.uuid, inst.status))
        src = self.hosts[inst.host]
        source = src.compute.live_move_source(inst.uuid)
        mig = Migration(uuid=str(uuid_lib.uuid4()), kind=LIVE_MIGRATION,
                        source=inst.host, dest=None, specs=dict(inst.specs),
                        flavor=inst.flavor)

        def claim(compute, consumer, flavor, allocations):
            return compute.claim_live_move(consumer, source, flavor,
                                           allocations=allocations)

        sim, moved = self.scheduler.schedule(
            mig.uuid, 'live migration %s of instance %s' % (mig.uuid,
                                                            inst.uuid),
            inst.flavor, exclude=(inst.host,), force=host, claim=claim)
        try:
            xml = moved.destination_xml(src.domain_xml(inst.name) or
                                        inst.guest.to_xml())
            guest = vconfig.LibvirtConfigGuest.parse_str(xml)
            self.validator.validate(guest)
        except Exception:
            sim.compute.release(mig.uuid)
            if self.client is not None and moved.claim.allocations:
                self.client.delete_allocations(mig.uuid)
            self.report(sim)
            raise
        sim.define_domain(xml)
        self.domains[sim.name][inst.uuid] = guest
        self.held[sim.name][mig.uuid] = tuple(d.address
                                              for d in moved.devices)
        mig.dest, mig.guest, mig.devices = sim.name, guest, tuple(
            d.address for d in moved.devices)
        mig.allocations = moved.claim.allocations
        mig.numa_cells = moved.claim.numa_cells
        inst.migration, inst.status = mig, MIGRATING
        self.report(sim)
        return mig

    def complete_live_migration(self, inst):
        """The guest runs on the destination: the source frees, the
        migration's claim becomes the instance's (a confirmed move)."""
        self._finish(inst, LIVE_MIGRATION)

    def abort_live_migration(self, inst):
        """Abort (or fail) a live migration: the destination frees its
        claim and its incoming guest; the source is not contacted."""
        self._roll_back(inst, LIVE_MIGRATION)

    def confirm_resize(self, inst):
        self._finish(inst, 'resize', 'migration')

    def _finish(self, inst, *kinds):
        mig = inst.migration
        if mig is None or mig.kind not in kinds:
            raise ValueError('instance %s has no %s in progress'
                             % (inst.uuid, ' or '.join(kinds)))
        src, dst = self.hosts[mig.source], self.hosts[mig.dest]
        src.compute.release(inst.uuid)
        self.held[src.name].pop(inst.uuid, None)
        if self.client is not None:
            self.client.delete_allocations(inst.uuid)
        if src is not dst:
            src.undefine_domain(inst.name)
            self.domains[src.name].pop(inst.uuid, None)
        dst.compute.confirm_move(mig.uuid, inst.uuid)
        self.held[dst.name][inst.uuid] = self.held[dst.name].pop(mig.uuid)
        self.domains[dst.name][inst.uuid] = mig.guest
        if self.client is not None and mig.allocations:
            scheduler.move_allocations(self.client, mig.uuid, inst.uuid)
        inst.host, inst.specs, inst.flavor = dst.name, mig.specs, mig.flavor
        inst.devices, inst.allocations = mig.devices, mig.allocations
        inst.numa_cells, inst.guest = mig.numa_cells, mig.guest
        inst.migration, inst.status = None, ACTIVE
        self.report(src)
        if dst is not src:
            self.report(dst)

    def revert_resize(self, inst):
        self._roll_back(inst, 'resize', 'migration')

    def _roll_back(self, inst, *kinds):
        mig = inst.migration
        if mig is None or mig.kind not in kinds:
            raise ValueError('instance %s has no %s in progress'
                             % (inst.uuid, ' or '.join(kinds)))
        src, dst = self.hosts[mig.source], self.hosts[mig.dest]
        dst.compute.release(mig.uuid)
        self.held[dst.name].pop(mig.uuid, None)
        if self.client is not None and mig.allocations:
            self.client.delete_allocations(mig.uuid)
        if dst is not src:
            dst.undefine_domain(inst.name)
            self.domains[dst.name].pop(inst.uuid, None)
        else:
            src.define_domain(inst.guest.to_xml())
            self.domains[src.name][inst.uuid] = inst.guest
        inst.migration, inst.status = None, ACTIVE
        self.report(dst)

    def evacuate(self, inst, host=None):
        """Rebuild ``inst`` elsewhere; its host must be down and is not
        contacted. The source's claim stays until the host comes back."""
        src = self.hosts[inst.host]
        if src.up:
            raise ValueError('cannot evacuate from %s: the compute service '
                             'is up' % src.name)
        sim, result = self.scheduler.schedule(
            inst.uuid, 'evacuation of instance %s' % inst.uuid, inst.flavor,
            exclude=(src.name,), force=host, merge=True)
        inst.guest = self._spawn(sim, inst, inst.uuid, result)
        self.evacuated.setdefault(src.name, set()).add(inst.uuid)
        inst.host = sim.name
        inst.devices = tuple(d.address for d in result.devices)
        inst.allocations = result.allocations
        inst.numa_cells = result.numa_cells
        self.report(sim)
        return sim
