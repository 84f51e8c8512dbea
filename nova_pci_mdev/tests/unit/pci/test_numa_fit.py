"""fit_instance: which host NUMA cells an instance's PCI requests fit on.

Host (from test_stats): cells 0 and 1 on socket 0, cell 2 on socket 1.
"""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev.pci import numa_fit
from nova_pci_mdev.tests.fixtures import stats_world as helpers

T = helpers.T
P = helpers.P
req = helpers.req
TOPOLOGY = helpers.TOPOLOGY


def vgpu(count=1, policy=P.REQUIRED, mdev_type='nvidia-35'):
    return req(count, alias='vGPU', vendor_id='10de', mdev_type=mdev_type,
               dev_type=T.MDEV_VF, policy=policy)


def ids(cells):
    return None if cells is None else [c.id for c in cells]


class TestFitInstance(testtools.TestCase):

    def _stats(self, *gpus):
        """gpus: (numa_node, slots, mdev_type)."""
        w = helpers.World()
        for node, slots, mdev_type in gpus:
            w.gpu(numa_node=node, slots=slots, mdev_type=mdev_type)
        return w.stats()

    def test_table(self):
        # (gpus, numa_nodes, requests, expected cell ids or None)
        table = [
            ([(1, 1, 'nvidia-35')], 1, [vgpu()], [1]),
            ([(2, 1, 'nvidia-35')], 1, [vgpu()], [2]),
            ([(0, 1, 'nvidia-35'), (2, 1, 'nvidia-35')], 2, [vgpu(2)],
             [0, 2]),
            ([(1, 2, 'nvidia-35')], 2, [vgpu(2)], [0, 1]),
            ([(1, 1, 'nvidia-35')], None, [vgpu()], None),
            ([(1, 1, 'nvidia-35')], 1, [vgpu(policy=P.PREFERRED)], [1]),
            ([(1, 1, 'nvidia-35')], 1, [vgpu(policy=P.SOCKET)], [1]),
            ([(0, 1, 'nvidia-35'), (1, 1, 'nvidia-36')], 1,
             [vgpu(mdev_type='nvidia-36')], [1]),
            # no PCI request: cells without devices first
            ([(0, 1, 'nvidia-35'), (1, 1, 'nvidia-35')], 1, [], [2]),
            ([(0, 1, 'nvidia-35')], 2, [], [1, 2]),
        ]
        for gpus, numa_nodes, requests, expected in table:
            stats = self._stats(*gpus)
            before = helpers.snapshot(stats)
            got = numa_fit.fit_instance(TOPOLOGY, numa_nodes, requests,
                                        stats)
            self.assertEqual(expected, ids(got), (gpus, numa_nodes))
            self.assertEqual(before, helpers.snapshot(stats))

    def test_affinity_preferred_over_first_fit(self):
        # cell 0 has two A slots, cell 1 one A and one B slot; both
        # requests are 'preferred', so cell 0 would do, but only cell 1
        # gives both affine devices.
        stats = self._stats((0, 2, 'nvidia-35'), (1, 1, 'nvidia-35'),
                            (1, 1, 'nvidia-36'))
        requests = [vgpu(policy=P.PREFERRED),
                    vgpu(policy=P.PREFERRED, mdev_type='nvidia-36')]
        self.assertEqual([1], ids(numa_fit.fit_instance(
            TOPOLOGY, 1, requests, stats)))
        self.assertEqual(P.PREFERRED, requests[0].numa_policy)

    def test_nothing_fits_explains_each_combination(self):
        stats = self._stats((0, 1, 'nvidia-35'))
        err = self.assertRaises(
            exception.RequestNotSatisfiable, numa_fit.fit_instance,
            TOPOLOGY, 1, [vgpu(2)], stats)
        self.assertIn('NUMA cells 0: alias vGPU: 1 free nvidia-35 slots '
                      'matching vendor_id=10de on NUMA node 0, policy '
                      'required, 2 requested', str(err))
        self.assertIn('NUMA cells 2: alias vGPU: 0 free', str(err))

    def test_no_numa_topology_still_checks_support(self):
        stats = self._stats((0, 1, 'nvidia-35'))
        err = self.assertRaises(
            exception.RequestNotSatisfiable, numa_fit.fit_instance,
            TOPOLOGY, None, [vgpu(2)], stats)
        self.assertIn('alias vGPU: 1 free nvidia-35 slots', str(err))

    def test_bad_numa_nodes(self):
        stats = self._stats()
        for value in (0, -1, '1', True):
            err = self.assertRaises(exception.InvalidValue,
                                    numa_fit.fit_instance, TOPOLOGY, value,
                                    [], stats)
            self.assertIn('hw:numa_nodes', str(err))
        err = self.assertRaises(exception.RequestNotSatisfiable,
                                numa_fit.fit_instance, TOPOLOGY, 4, [],
                                stats)
        self.assertIn('hw:numa_nodes=4 needs 4 host NUMA cells, the host '
                      'has 3 (0, 1, 2)', str(err))
        self.assertRaises(exception.RequestNotSatisfiable,
                          numa_fit.fit_instance, numa.HostTopology(), 1,
                          [], stats)
