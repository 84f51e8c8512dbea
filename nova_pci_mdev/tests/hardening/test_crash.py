"""Processes killed (SIGKILL) between creating mdevs and committing.

The product's order inside one claim is: one store transaction (BEGIN
IMMEDIATE) -> claim in the tracker -> create the missing mdevs -> write the
rows -> COMMIT. Each scenario runs the CLI's wiring of the bundled sample
host in a real child process (:mod:`.procs`), kills it with SIGKILL at one
point, then a restarted service syncs and must reconcile:

* no lost allocation: an instance whose claim committed holds exactly its
  devices, each mdev on its parent with its type (recreated if lost);
* no leaked mdev: every mdev on the host is held by an instance or offered
  as a free slot (and is the one the next claim of it reuses);
* full capacity: once everything is released, every parent offers as many
  free slots as before the crash.

"Between committing and creating" cannot happen in one claim (creation
precedes COMMIT); it happens when the mdev of a committed claim is lost
afterwards (the host lost it, e.g. a transient mdev and a reboot), which
the ``after-commit, mdev lost`` scenarios play.
"""

import os

import fixtures

from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.hardening import hosts
from nova_pci_mdev.tests.hardening import procs
from nova_pci_mdev.tests.hardening import recorder

Status = fields.PciDeviceStatus
INSTANCE = 'c0ffee00-0000-4000-8000-000000000001'
OTHER = 'c0ffee00-0000-4000-8000-000000000002'
#: Aliases of the bundled nova.conf whose parents have no mdev yet, so
#: that every slot they give must be created.
CREATES_TWO = {'pci_passthrough:alias': 'nvidia-223:1,mtty:1'}
CREATES_ONE = {'pci_passthrough:alias': 'nvidia-223:1'}


def _flavor(compute, specs):
    return flavor_mod.parse(specs, compute.settings.aliases)


def child_claim(channel, state_dir, point, nth, specs, instance):
    compute = procs.cli_compute(state_dir)
    compute = procs.hooked(compute, procs.KillPoint(channel, point, nth))
    result = compute.claim(instance, _flavor(compute, specs))
    return [d.address for d in result.devices]


def child_release(channel, state_dir, point, nth, instance):
    compute = procs.cli_compute(state_dir)
    compute = procs.hooked(compute, procs.KillPoint(channel, point, nth))
    return [d.address for d in compute.release(instance)]


def child_sync(channel, state_dir, point, nth):
    compute = procs.cli_compute(state_dir)
    compute = procs.hooked(compute, procs.KillPoint(channel, point, nth))
    _report, recreated = compute.sync()
    return recreated.recreated


class CrashTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        tmp = self.useFixture(fixtures.TempDir()).path
        self.state_dir = os.path.join(tmp, 'state')
        self.logs = os.path.join(tmp, 'logs')
        os.mkdir(self.logs)

    def service(self):
        compute = procs.cli_compute(self.state_dir)
        self.addCleanup(procs.close, compute)
        return compute

    def capacity(self, compute):
        """{parent: free slots} of the mdev parents."""
        free = {}
        for dev in compute.snapshot().devices:
            if dev.dev_type == fields.PciDeviceType.MDEV_VF:
                free.setdefault(dev.parent_addr, 0)
                if dev.status == Status.AVAILABLE:
                    free[dev.parent_addr] += 1
            elif dev.dev_type == fields.PciDeviceType.MDEV_PF and (
                    capacity.creatable(dev)):
                # Slots still to create.
                free[dev.address] = free.get(dev.address, 0) + (
                    capacity.usable(dev))
        return free

    def crash(self, target, *args):
        """Run ``target`` in a child; return where it halted (killed)."""
        child = procs.spawn(self, self.logs, target, self.state_dir, *args)
        message = child.next()
        self.assertIsNotNone(message, child.output())
        self.assertNotIn('error', message, message.get('error'))
        self.assertIn('at', message, 'the kill point was never reached: %s'
                      % message)
        child.kill()
        self.assertTrue(child.killed)
        return message

    def assertReconciled(self, compute, expect_held, capacity):
        """The checks every scenario ends with (module docstring)."""
        # The restarted service's first sync (views only read the host).
        compute.sync()
        mdevs = compute.mdevs.backend.list()
        held = hosts.held(compute)
        self.assertEqual(sorted(expect_held), sorted(held))
        records = compute.snapshot().instances
        self.assertEqual(sorted(expect_held), sorted(records))
        devices = {d.address: d for d in compute.snapshot().devices}
        for instance, addresses in held.items():
            self.assertEqual(sorted(records[instance]['devices']), addresses)
            for address in addresses:
                dev = devices[address]
                self.assertEqual(Status.ALLOCATED, dev.status)
                if dev.dev_type == fields.PciDeviceType.MDEV_VF:
                    info = mdevs.get(address)
                    self.assertIsNotNone(info, 'mdev %s lost' % address)
                    self.assertEqual((dev.parent_addr, dev.mdev_type),
                                     (info.parent, info.mdev_type))
        self.assertEqual([], hosts.unusable_mdevs(compute, mdevs))
        for instance in list(held):
            compute.release(instance)
        self.assertEqual(capacity, self.capacity(compute))

    def _baseline(self, pre_claim=None):
        compute = self.service()
        capacity = self.capacity(compute)
        if pre_claim:
            compute.claim(INSTANCE, _flavor(compute, pre_claim))
        mdevs = compute.mdevs.backend.list()
        procs.close(compute)
        return capacity, mdevs

    def test_claim_killed(self):
        scenarios = (
            # (point, nth, specs, committed, mdevs made before the kill)
            ('before-create', 1, CREATES_ONE, False, 0),
            ('after-create', 1, CREATES_ONE, False, 1),
            ('after-create', 1, CREATES_TWO, False, 1),
            ('after-create', 2, CREATES_TWO, False, 2),
            ('before-commit', 1, CREATES_TWO, False, 2),
            ('after-commit', 1, CREATES_TWO, True, 2),
        )
        for point, nth, specs, committed, count in scenarios:
            with self.record('crash', 'SIGKILL during a claim %s #%d (%d '
                             'mdev(s) to create)' % (
                                 point, nth, len(specs[
                                     'pci_passthrough:alias'].split(','))),
                             'restart: %s; no leaked mdev; full capacity'
                             % ('allocation kept, mdevs on their parents'
                                if committed else 'nothing claimed, mdevs '
                                'made before the kill are free slots the '
                                'next claim reuses')) as row:
                row.cases += 1
                self.setUp_state()
                capacity, before = self._baseline()
                self.crash(child_claim, point, nth, specs, INSTANCE)
                compute = self.service()
                made = set(compute.mdevs.backend.list()) - set(before)
                self.assertEqual(count, len(made))
                if not committed:
                    # The next claim of the same request reuses them.
                    result = compute.claim(OTHER, _flavor(compute, specs))
                    self.assertEqual(set(), made & set(
                        result.created_mdevs))
                    self.assertLessEqual(made, {d.address
                                                for d in result.devices})
                    expect = [OTHER]
                else:
                    expect = [INSTANCE]
                self.assertReconciled(compute, expect, capacity)

    def test_committed_claim_whose_mdev_is_lost(self):
        with self.record('crash', 'SIGKILL right after a claim committed, '
                         'and its mdevs lost (committed, not created)',
                         'restart recreates them: same UUIDs, same '
                         'parents; allocation kept') as row:
            row.cases += 1
            self.setUp_state()
            capacity, before = self._baseline()
            self.crash(child_claim, 'after-commit', 1, CREATES_TWO, INSTANCE)
            compute = self.service()
            held = hosts.held(compute)[INSTANCE]
            lost = {u: compute.mdevs.backend.list()[u] for u in held}
            for uuid in held:
                compute.mdevs.backend.remove(uuid)
            procs.close(compute)
            compute = self.service()
            _report, recreated = compute.sync()
            self.assertEqual(sorted(held), sorted(recreated.recreated))
            self.assertEqual(lost, {u: compute.mdevs.backend.list()[u]
                                    for u in held})
            self.assertReconciled(compute, [INSTANCE], capacity)

    def test_release_killed(self):
        for point, released in (('before-commit', False),
                                ('after-commit', True)):
            with self.record('crash', 'SIGKILL during a release, %s'
                             % point, 'restart: the instance holds all its '
                             'devices or none (%s); no leaked mdev'
                             % ('none' if released else 'all')) as row:
                row.cases += 1
                self.setUp_state()
                capacity, _before = self._baseline(pre_claim=CREATES_TWO)
                self.crash(child_release, point, 1, INSTANCE)
                compute = self.service()
                self.assertReconciled(compute,
                                      [] if released else [INSTANCE],
                                      capacity)

    def test_recreation_after_reboot_killed(self):
        for point, nth in (('after-create', 1), ('after-create', 2),
                           ('before-commit', 1)):
            with self.record('crash', 'host reboot, then SIGKILL while the '
                             'restarted service recreates mdevs (%s #%d)'
                             % (point, nth), 'restart: every allocated mdev '
                             'exists once, same UUID and parent; allocation '
                             'kept') as row:
                row.cases += 1
                self.setUp_state()
                capacity, _before = self._baseline(pre_claim=CREATES_TWO)
                compute = self.service()
                held = hosts.held(compute)[INSTANCE]
                for uuid in list(compute.mdevs.backend.list()):
                    compute.mdevs.backend.remove(uuid)     # the reboot
                procs.close(compute)
                self.crash(child_sync, point, nth)
                compute = self.service()
                self.assertEqual(held, hosts.held(compute)[INSTANCE])
                self.assertReconciled(compute, [INSTANCE], capacity)

    def setUp_state(self):
        """A fresh state directory for the next scenario."""
        self.state_dir = self.useFixture(fixtures.TempDir()).join('state')
