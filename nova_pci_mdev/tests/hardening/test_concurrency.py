"""Eight processes claiming and releasing on one state directory.

Each worker is a real process (:mod:`.procs`) with the CLI's wiring of the
bundled sample host on the same ``--state-dir``: its own libvirt
connection, SQLite connection and emulated mdev backend. Workers pick
requests that compete for the small pools (whole GPUs against their vGPU
slots, 4 VFs, 8 nvidia-223 and mlx5 slots) through both request paths.

An independent ledger (a JSON file under ``flock``) proves that no device
is ever held by two instances while the run goes on: a worker records its
devices right after its claim committed and forgets them right before it
releases, so a device found in the ledger under another owner (or a slot
whose parent is held whole, or the reverse) is one the store handed out
twice. At the end the store, the ledger and the workers' own accounts must
agree, every held mdev must exist, and releasing everything must give back
the full capacity.

Light (normal suite): 8 x 25 operations; ``hardening`` env: 8 x 125 =
1,000.
"""

import collections
import json
import os
import random
import uuid as uuid_lib

import fixtures
from testtools import content

from nova_pci_mdev import exception
from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import ledger as ledger_mod
from nova_pci_mdev.tests.hardening import hosts
from nova_pci_mdev.tests.hardening import procs
from nova_pci_mdev.tests.hardening import recorder

Status = fields.PciDeviceStatus
WORKERS = 8
#: Requests on the bundled host (nova.conf aliases and resources).
REQUESTS = (
    {'pci_passthrough:alias': 'gpu-whole:1'},
    {'pci_passthrough:alias': 'nic-vf:1'},
    {'pci_passthrough:alias': 'nic-vf:2'},
    {'pci_passthrough:alias': 'nvidia-223:2'},
    {'pci_passthrough:alias': 'mlx5:2'},
    {'pci_passthrough:alias': 'vGPU:1', 'hw:numa_nodes': '1'},
    {'pci_passthrough:alias': 'vGPU:1,mtty:1'},
    {'resources:VGPU': '1'},
    {'resources:CUSTOM_MLX5': '1', 'pci_passthrough:alias': 'nic-vf:1'},
)


def worker(channel, state_dir, ledger_path, number, operations, max_held):
    """One process: ``operations`` claims and releases (module docstring)."""
    rnd = random.Random(number)
    ledger = ledger_mod.Ledger(ledger_path)
    counts = collections.Counter()
    for attempt in range(10):
        try:
            # Opening the store is a write transaction too (schema check).
            compute = procs.cli_compute(state_dir)
            break
        except exception.StoreError:
            counts['start retries'] += 1
    else:
        raise AssertionError('the store stayed locked for 10 starts')
    mine = []
    for op in range(operations):
        if mine and (len(mine) >= max_held or rnd.random() < 0.45):
            instance = mine.pop(rnd.randrange(len(mine)))
            ledger.give_back(instance)
            for attempt in range(10):
                try:
                    freed = compute.release(instance)
                    break
                except exception.StoreError:
                    counts['release retries'] += 1
            else:
                raise AssertionError('release of %s never got the store'
                                     % instance)
            assert freed, 'release of %s freed nothing' % instance
            counts['released'] += 1
            continue
        specs = rnd.choice(REQUESTS)
        instance = str(uuid_lib.UUID(int=(number + 1) << 64 | op))
        flavor = flavor_mod.parse(specs, compute.settings.aliases)
        try:
            result = compute.claim(instance, flavor)
        except exception.RequestNotSatisfiable:
            counts['unsatisfiable'] += 1
            continue
        except exception.StoreError:
            counts['store busy'] += 1     # gave up waiting: no claim
            continue
        conflicts = ledger.take(instance, [
            {'address': d.address, 'parent_addr': d.parent_addr,
             'dev_type': d.dev_type} for d in result.devices])
        if conflicts:
            channel.send(conflicts=conflicts)
        counts['claimed'] += 1
        mine.append(instance)
    return {'counts': dict(counts), 'held': sorted(mine)}


class ConcurrencyTest(recorder.HardeningTestCase):

    def test_processes_share_one_state_directory(self):
        per_worker = recorder.scale(25, 125)
        total = WORKERS * per_worker
        with self.record('concurrency', '%d processes x %d claims/releases '
                         '(%d in all) on one state directory, both request '
                         'paths, contended pools' % (
                             WORKERS, per_worker, total),
                         'no device ever held by two instances (nor a parent '
                         'and its child); store, ledger and workers agree; '
                         'full capacity after release') as row:
            self.useFixture(fixtures.FakeLogger())
            tmp = self.useFixture(fixtures.TempDir()).path
            state_dir = os.path.join(tmp, 'state')
            logs = os.path.join(tmp, 'logs')
            os.mkdir(logs)
            ledger = ledger_mod.Ledger(os.path.join(tmp, 'ledger.json'))
            compute = procs.cli_compute(state_dir)
            capacity = self._capacity(compute)
            procs.close(compute)

            children = [procs.spawn(self, logs, worker, state_dir,
                                    ledger.path, number, per_worker, 4)
                        for number in range(WORKERS)]
            counts = collections.Counter()
            held = []
            conflicts = []
            for child in children:
                for message in child.messages():
                    self.assertNotIn('error', message,
                                     message.get('error'))
                    conflicts.extend(message.get('conflicts', ()))
                    if 'done' in message:
                        counts.update(message['done']['counts'])
                        held.extend(message['done']['held'])
                self.assertEqual(0, child.wait(), child.output())
            row.cases = total
            self.assertEqual([], conflicts)
            self.assertEqual(total, counts['claimed'] + counts['released']
                             + counts['unsatisfiable']
                             + counts['store busy'])
            self.assertEqual(counts['claimed'] - counts['released'],
                             len(held))
            self.assertGreater(counts['claimed'], total // 4)
            self.addDetail('counts', content.text_content(
                json.dumps(dict(counts))))

            compute = procs.cli_compute(state_dir)
            self.addCleanup(procs.close, compute)
            in_store = hosts.held(compute)
            self.assertEqual(sorted(held), sorted(in_store))
            self.assertEqual(ledger.holdings(), in_store)
            records = compute.snapshot().instances
            self.assertEqual(sorted(held), sorted(records))
            for instance, addresses in in_store.items():
                self.assertEqual(addresses, sorted(records[instance]
                                                   ['devices']))
            mdevs = compute.mdevs.backend.list()
            for dev in compute.snapshot().devices:
                if (dev.status == Status.ALLOCATED
                        and dev.dev_type == ledger_mod.DevType.MDEV_VF):
                    self.assertIn(dev.address, mdevs)
            self.assertEqual([], hosts.unusable_mdevs(compute, mdevs))
            for instance in in_store:
                compute.release(instance)
            self.assertEqual(capacity, self._capacity(compute))
            row.subject += (
                ' [claimed %d, released %d, unsatisfiable %d; gave up on a '
                'locked store (busy_timeout 10 s): %d claims, %d release '
                'attempts, %d process starts]' % (
                    counts['claimed'], counts['released'],
                    counts['unsatisfiable'], counts['store busy'],
                    counts['release retries'], counts['start retries']))

    @staticmethod
    def _capacity(compute):
        free = collections.Counter()
        for dev in compute.snapshot().devices:
            if dev.status == Status.AVAILABLE:
                free[(dev.dev_type, dev.parent_addr)] += 1
            if capacity.usable(dev):       # slots still to create
                free[(fields.PciDeviceType.MDEV_VF, dev.address)] += (
                    capacity.usable(dev))
        return free
