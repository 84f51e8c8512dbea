"""NUMA policy tables: device NUMA node x policy x instance cells.

Every row builds its hosts with :func:`worlds.numa_host` (4 cells, cells
0-1 on socket 0, cells 2-3 on socket 1) and boots one flavor; each row runs
for every device kind (test id ``test_policy(<kind>,<row>)``)::

    socket 0                     socket 1
    | cell 0      | cell 1      | cell 2      | cell 3      |

``families`` per host: ``(NUMA node or None, children)``; the request is
``(count, hw:pci_numa_affinity_policy, hw:numa_nodes)``; the expected
answer is ``(host, instance cells, NUMA nodes of the devices)`` or None
for "no valid host" (and then nothing changed on any host).
"""

import collections

import testscenarios

from nova_pci_mdev.tests.functional import base
from nova_pci_mdev.tests.functional import cloud as cloud_mod
from nova_pci_mdev.tests.functional import worlds

load_tests = testscenarios.load_tests_apply_scenarios

Row = collections.namedtuple('Row', 'name hosts request expected')
N = None        # a device without NUMA affinity

ROWS = [
    # -- one host --------------------------------------------------------
    Row('required-affine', {'h1': [(2, 1)]}, (1, 'required', 1),
        ('h1', (2,), [2])),
    Row('required-no-numa-info', {'h1': [(N, 1)]}, (1, 'required', 1),
        None),
    Row('legacy-no-numa-info', {'h1': [(N, 1)]}, (1, 'legacy', 1),
        ('h1', (0,), [N])),
    Row('preferred-no-numa-info', {'h1': [(N, 1)]}, (1, 'preferred', 1),
        ('h1', (0,), [N])),
    Row('socket-no-numa-info', {'h1': [(N, 1)]}, (1, 'socket', 1), None),
    Row('required-split-over-sockets', {'h1': [(0, 1), (2, 1)]},
        (2, 'required', 1), None),
    Row('legacy-split-over-sockets', {'h1': [(0, 1), (2, 1)]},
        (2, 'legacy', 1), None),
    Row('preferred-split-over-sockets', {'h1': [(0, 1), (2, 1)]},
        (2, 'preferred', 1), ('h1', (0,), [0, 2])),
    Row('socket-split-over-sockets', {'h1': [(0, 1), (2, 1)]},
        (2, 'socket', 1), None),
    Row('socket-split-within-a-socket', {'h1': [(0, 1), (1, 1)]},
        (2, 'socket', 1), ('h1', (0,), [0, 1])),
    Row('required-two-instance-cells', {'h1': [(0, 1), (2, 1)]},
        (2, 'required', 2), ('h1', (0, 2), [0, 2])),
    Row('required-without-instance-numa', {'h1': [(N, 1)]},
        (1, 'required', None), ('h1', None, [N])),
    Row('legacy-prefers-affine', {'h1': [(N, 1), (1, 1)]},
        (1, 'legacy', 1), ('h1', (1,), [1])),
    Row('legacy-affine-plus-no-numa-info', {'h1': [(N, 1), (1, 1)]},
        (2, 'legacy', 1), ('h1', (1,), [N, 1])),
    Row('preferred-picks-the-cell-with-most', {'h1': [(0, 1), (3, 2)]},
        (2, 'preferred', 1), ('h1', (3,), [3, 3])),
    Row('socket-refuses-no-numa-info', {'h1': [(N, 1), (1, 1)]},
        (2, 'socket', 1), None),
    Row('more-instance-cells-than-host-cells', {'h1': [(0, 1)]},
        (1, 'required', 5), None),
    # -- several hosts: the first host (by name) that fits --------------
    Row('required-skips-host-without-numa-info',
        {'h1': [(N, 2)], 'h2': [(1, 1)]}, (1, 'required', 1),
        ('h2', (1,), [1])),
    Row('legacy-takes-first-host-without-numa-info',
        {'h1': [(N, 2)], 'h2': [(1, 1)]}, (1, 'legacy', 1),
        ('h1', (0,), [N])),
    Row('socket-skips-host-split-over-sockets',
        {'h1': [(0, 1), (2, 1)], 'h2': [(2, 1), (3, 1)]},
        (2, 'socket', 1), ('h2', (2,), [2, 3])),
    Row('required-finds-two-on-one-cell',
        {'h1': [(0, 1), (1, 1)], 'h2': [(3, 2)]}, (2, 'required', 1),
        ('h2', (3,), [3, 3])),
    Row('required-fits-nowhere',
        {'h1': [(N, 1)], 'h2': [(0, 1), (2, 1)]}, (2, 'required', 1),
        None),
]


def _nodes(nodes):
    return sorted(nodes, key=lambda n: -1 if n is None else n)


class NumaPolicyTableTest(base.CloudTestCase):
    scenarios = testscenarios.multiply_scenarios(
        worlds.SCENARIOS, [(row.name, {'row': row}) for row in ROWS])

    def test_policy(self):
        row = self.row
        hosts = {name: worlds.numa_host(self.cloud, name, self.kind,
                                        families)
                 for name, families in sorted(row.hosts.items())}
        count, policy, numa_nodes = row.request
        specs = self.kind.flavor(count, policy, numa_nodes)
        before = self.snapshot_all()
        if row.expected is None:
            exc = self.assertRaises(cloud_mod.NoValidHost, self.cloud.boot,
                                    specs)
            self.assertEqual(sorted(hosts), sorted(exc.reasons))
            self.assertEqual(before, self.snapshot_all())
            self.verify()
            return
        inst = self.cloud.boot(specs)
        self.verify()
        want_host, want_cells, want_nodes = row.expected
        sim = hosts[inst.host]
        devices = sim.devices()
        got = (inst.host, inst.numa_cells,
               _nodes(devices[a].numa_node for a in inst.devices))
        self.assertEqual((want_host, want_cells, _nodes(want_nodes)), got)
        self.assertEqual({self.kind.child_type},
                         {devices[a].dev_type for a in inst.devices})
        for name, other in hosts.items():
            if name != inst.host:
                self.assertEqual(before[name], self.host_view(other))
