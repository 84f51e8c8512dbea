"""PciDeviceStats: pools, matching, NUMA policies, explain, consume.

Devices are built with ``objects.PciDevice.create`` and linked
parent/child by :class:`..fixtures.stats_world.World` (no tracker
involved). Run the scale check by hand::

    /tmp/venv/bin/python -m nova_pci_mdev.tests.unit.pci.test_stats
"""

import collections
import types

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.pci import stats as stats_mod
from nova_pci_mdev.tests.fixtures import opcount
from nova_pci_mdev.tests.fixtures import stats_world

objects.register_all()


class TestPools(testtools.TestCase):

    def test_one_pool_per_dev_type(self):
        w = stats_world.World()
        w.gpu(numa_node=1, slots=2)
        w.nic(numa_node=0, vfs=3)
        w.dev(stats_world.T.STANDARD, numa_node=None)
        w.dev(stats_world.T.VDPA, numa_node=0)
        self.assertEqual({
            (stats_world.T.MDEV_PF, 'nvidia-35', 1): 1,
            (stats_world.T.MDEV_VF, 'nvidia-35', 1): 2,
            (stats_world.T.SRIOV_PF, None, 0): 1,
            (stats_world.T.SRIOV_VF, None, 0): 3,
            (stats_world.T.STANDARD, None, None): 1,
            (stats_world.T.VDPA, None, 0): 1,
        }, stats_world.counts(w.stats()))

    def test_each_key_field_splits_pools(self):
        variants = [
            {}, {'vendor_id': '8086'}, {'product_id': '1eb9'},
            {'mdev_type': 'nvidia-36'}, {'numa_node': 1},
            {'dev_type': stats_world.T.MDEV_PF},
        ]
        for change in variants:
            w = stats_world.World()
            base = dict(dev_type=stats_world.T.MDEV_VF, mdev_type='nvidia-35')
            w.dev(**base)
            w.dev(**dict(base, **change))
            pools = w.stats().to_pool_list()
            self.assertEqual(1 if not change else 2, len(pools), change)
            self.assertEqual(2, sum(p.count for p in pools))

    def test_tags_split_pools_and_untagged_devices_are_not_pooled(self):
        w = stats_world.World()
        a, b, c, d = (w.dev(stats_world.T.SRIOV_VF) for _ in range(4))
        tags = {a.address: {'physical_network': 'net1'},
                b.address: {'physical_network': 'net2'},
                c.address: {'physical_network': 'net1',
                            'resource_class': 'CUSTOM_X'},
                d.address: None}
        stats = w.stats(tags_of=lambda dev: tags[dev.address])
        pools = sorted((p.tags['physical_network'], p.count)
                       for p in stats.to_pool_list())
        self.assertEqual([('net1', 2), ('net2', 1)], pools)
        self.assertNotIn(d, stats.devices())

    def test_add_is_idempotent_and_remove_of_absent_is_noop(self):
        w = stats_world.World()
        dev = w.dev(stats_world.T.SRIOV_VF)
        stats = w.stats()
        stats.add_device(dev)
        self.assertEqual([dev], stats.devices())
        stats.remove_device(dev)
        stats.remove_device(dev)
        self.assertEqual([], stats.devices())
        self.assertEqual(0, len(stats.to_pool_list(include_empty=True)))

    def test_busy_devices_are_not_pooled_and_readding_syncs(self):
        w = stats_world.World()
        parent, (slot,) = w.gpu(slots=1)
        stats = w.stats()
        slot.claim(stats_world.INST)                     # parent becomes unclaimable
        for dev in (slot, parent):
            stats.add_device(dev)
        self.assertEqual({}, stats_world.counts(stats))
        slot.free(stats_world.INST)
        for dev in (slot, parent):
            stats.add_device(dev)
        self.assertEqual({(stats_world.T.MDEV_PF, 'nvidia-35', 0): 1,
                          (stats_world.T.MDEV_VF, 'nvidia-35', 0): 1}, stats_world.counts(stats))

    def test_changed_numa_node_moves_device(self):
        w = stats_world.World()
        dev = w.dev(stats_world.T.SRIOV_VF, numa_node=0)
        stats = w.stats()
        dev.numa_node = 1
        stats.add_device(dev)
        self.assertEqual({(stats_world.T.SRIOV_VF, None, 1): 1}, stats_world.counts(stats))

    def test_existing_mdevs_are_picked_before_creatable_ones(self):
        w = stats_world.World()
        parent, slots = w.gpu(slots=3, existing=0)
        slots[2].extra_info = {'mdev_exists': 'true'}
        stats = w.stats()
        got = stats.consume_requests([stats_world.req(2, dev_type=stats_world.T.MDEV_VF)])
        self.assertEqual([slots[2], slots[0]], got)

    def test_from_pools_round_trip_and_apply_counts(self):
        w = stats_world.World()
        w.gpu(numa_node=1, slots=3)
        w.nic(numa_node=0, vfs=2)
        pools = w.stats().to_pool_list()
        sched = stats_mod.PciDeviceStats.from_pools(pools, stats_world.TOPOLOGY)
        self.assertEqual([p.obj_to_primitive() for p in pools],
                         [p.obj_to_primitive()
                          for p in sched.to_pool_list()])
        vgpu = stats_world.req(2, mdev_type='nvidia-35', dev_type=stats_world.T.MDEV_VF,
                               policy=stats_world.P.REQUIRED)
        self.assertFalse(sched.support_requests([vgpu, vgpu], stats_world.cells(1)))
        sched.apply_requests([vgpu], stats_world.cells(1))
        self.assertEqual(1, stats_world.counts(sched)[(stats_world.T.MDEV_VF, 'nvidia-35', 1)])
        before = stats_world.snapshot(sched)
        self.assertRaises(exception.PciDeviceRequestFailed,
                          sched.apply_requests, [vgpu], stats_world.cells(1))
        self.assertEqual(before, stats_world.snapshot(sched))


# spec -> dev_types it may be served from; every dev_type exists on the host
MATCH_TABLE = [
    ({'vendor_id': '10de'}, {stats_world.T.STANDARD, stats_world.T.SRIOV_VF, stats_world.T.MDEV_VF}),
    ({'vendor_id': '10DE'}, {stats_world.T.STANDARD, stats_world.T.SRIOV_VF, stats_world.T.MDEV_VF}),
    ({'dev_type': stats_world.T.STANDARD}, {stats_world.T.STANDARD}),
    ({'dev_type': stats_world.T.SRIOV_PF}, {stats_world.T.SRIOV_PF}),
    ({'dev_type': stats_world.T.SRIOV_VF}, {stats_world.T.SRIOV_VF}),
    ({'dev_type': stats_world.T.VDPA}, {stats_world.T.VDPA}),
    ({'dev_type': stats_world.T.MDEV_PF}, {stats_world.T.MDEV_PF}),
    ({'dev_type': stats_world.T.MDEV_VF}, {stats_world.T.MDEV_VF}),
    ({'mdev_type': 'nvidia-35'}, {stats_world.T.MDEV_VF}),
    ({'mdev_type': 'NVIDIA-35'}, set()),
    ({'mdev_type': 'nvidia-35', 'dev_type': stats_world.T.MDEV_PF}, {stats_world.T.MDEV_PF}),
    ({'vendor_id': '8086'}, set()),
    ({'resource_class': 'CUSTOM_X', 'dev_type': stats_world.T.VDPA}, {stats_world.T.VDPA}),
]


class TestMatching(testtools.TestCase):

    def _host(self):
        w = stats_world.World()
        w.dev(stats_world.T.STANDARD)
        w.dev(stats_world.T.VDPA)
        pf = w.dev(stats_world.T.SRIOV_PF)
        w.dev(stats_world.T.SRIOV_VF, parent=pf)
        w.gpu(slots=1)
        return w

    def test_dev_type_table(self):
        for spec, expected in MATCH_TABLE:
            stats = self._host().stats()
            got = []
            for _ in range(len(self._host().devices) + 1):
                try:
                    dev, = stats.consume_requests([stats_world.req(1, **spec)])
                except exception.PciDeviceRequestFailed:
                    break
                got.append(dev.dev_type)
            self.assertEqual(sorted(expected), sorted(got), spec)

    def test_specs_are_ored(self):
        stats = self._host().stats()
        either = stats_world.req(2, specs=[{'dev_type': stats_world.T.MDEV_PF},
                                           {'dev_type': stats_world.T.VDPA}])
        got = stats.consume_requests([either])
        self.assertEqual({stats_world.T.MDEV_PF, stats_world.T.VDPA}, {d.dev_type for d in got})

    def test_tags_must_match_case_insensitively(self):
        w = stats_world.World()
        a = w.dev(stats_world.T.SRIOV_VF)
        b = w.dev(stats_world.T.SRIOV_VF)
        tags = {a.address: {'physical_network': 'Net1'},
                b.address: {'physical_network': 'net2'}}
        stats = w.stats(tags_of=lambda dev: tags[dev.address])
        got = stats.consume_requests([stats_world.req(physical_network='NET1')])
        self.assertEqual([a], got)
        self.assertFalse(stats.support_requests(
            [stats_world.req(physical_network='net1')]))

    def test_remote_managed_pool_only_when_asked(self):
        w = stats_world.World()
        vf = w.dev(stats_world.T.SRIOV_VF)
        stats = w.stats(tags_of=lambda dev: {'remote_managed': 'true'})
        self.assertFalse(stats.support_requests([stats_world.req(dev_type=stats_world.T.SRIOV_VF)]))
        self.assertEqual([vf], stats.consume_requests(
            [stats_world.req(dev_type=stats_world.T.SRIOV_VF, remote_managed='true')]))

    def test_aliases_differing_in_mdev_type_select_their_own(self):
        w = stats_world.World()
        _, slots35 = w.gpu(mdev_type='nvidia-35', slots=2)
        _, slots36 = w.gpu(mdev_type='nvidia-36', slots=2)
        stats = w.stats()
        a35 = stats_world.req(1, alias='vGPU35', vendor_id='10de',
                              mdev_type='nvidia-35', dev_type=stats_world.T.MDEV_VF)
        a36 = stats_world.req(1, alias='vGPU36', vendor_id='10de',
                              mdev_type='nvidia-36', dev_type=stats_world.T.MDEV_VF)
        got = stats.consume_requests([a36, a35])
        self.assertEqual([slots36[0], slots35[0]], got)
        self.assertEqual([slots36[1]], stats.consume_requests([a36]))
        self.assertFalse(stats.support_requests([a36]))
        self.assertTrue(stats.support_requests([a35]))


# policy -> instance cells -> device NUMA nodes that may serve the request.
# Host: cells 0 and 1 on socket 0, cell 2 on socket 1; devices on 0, 1, 2
# and without NUMA node.
ALL_NODES = {0, 1, 2, None}
POLICY_TABLE = {
    stats_world.P.REQUIRED: {(0,): {0}, (1,): {1}, (0, 1): {0, 1}, (2,): {2},
                             None: ALL_NODES},
    stats_world.P.LEGACY: {(0,): {0, None}, (1,): {1, None}, (0, 1): {0, 1, None},
                           (2,): {2, None}, None: ALL_NODES},
    stats_world.P.PREFERRED: {(0,): ALL_NODES, (1,): ALL_NODES, (0, 1): ALL_NODES,
                              (2,): ALL_NODES, None: ALL_NODES},
    stats_world.P.SOCKET: {(0,): {0, 1}, (1,): {0, 1}, (0, 1): {0, 1}, (2,): {2},
                           None: ALL_NODES},
}


class TestNumaPolicy(testtools.TestCase):

    def _fits(self, node, policy, instance_cells, topology=stats_world.TOPOLOGY):
        w = stats_world.World()
        w.gpu(numa_node=node, slots=1)
        stats = w.stats(topology)
        request = stats_world.req(1, alias='vGPU', mdev_type='nvidia-35',
                                  dev_type=stats_world.T.MDEV_VF, policy=policy)
        numa_cells = (None if instance_cells is None
                      else [topology.cell(i) for i in instance_cells])
        fits = stats.support_requests([request], numa_cells)
        self.assertEqual(fits, not stats.explain([request], numa_cells))
        return fits

    def test_policy_table(self):
        for policy, by_cells in POLICY_TABLE.items():
            for instance_cells, allowed in by_cells.items():
                for node in sorted(ALL_NODES, key=str):
                    self.assertEqual(
                        node in allowed,
                        self._fits(node, policy, instance_cells),
                        'device node %s, policy %s, cells %s' % (
                            node, policy, instance_cells))

    def test_no_policy_means_legacy(self):
        for instance_cells, allowed in POLICY_TABLE[stats_world.P.LEGACY].items():
            for node in ALL_NODES:
                self.assertEqual(node in allowed,
                                 self._fits(node, None, instance_cells))

    def test_socket_without_socket_ids_is_required(self):
        for node in ALL_NODES:
            self.assertEqual(node == 0, self._fits(
                node, stats_world.P.SOCKET, (0,), topology=stats_world.NO_SOCKETS))
        self.assertEqual(True, self._fits(
            1, stats_world.P.SOCKET, (0,), topology=stats_world.TOPOLOGY))

    def test_affine_devices_are_taken_first(self):
        # (policy, instance cell, device nodes in host order, expected node)
        table = [
            (stats_world.P.PREFERRED, 1, [0, 1], 1),
            (stats_world.P.PREFERRED, 1, [None, 0], None),
            (stats_world.P.LEGACY, 1, [None, 1], 1),
            (stats_world.P.SOCKET, 1, [0, 1], 1),
            (stats_world.P.PREFERRED, 1, [0, 2], 0),
        ]
        for policy, cell, nodes, expected in table:
            w = stats_world.World()
            for node in nodes:
                w.dev(stats_world.T.SRIOV_VF, numa_node=node)
            dev, = w.stats().consume_requests(
                [stats_world.req(policy=policy, dev_type=stats_world.T.SRIOV_VF)], stats_world.cells(cell))
            self.assertEqual(expected, dev.numa_node, (policy, nodes))

    def test_two_devices_policy_mixing(self):
        # (policy, device nodes, fits for an instance on cell 0 asking 2)
        table = [
            (stats_world.P.REQUIRED, [0, 0], True),
            (stats_world.P.REQUIRED, [0, None], False),
            (stats_world.P.LEGACY, [0, None], True),
            (stats_world.P.LEGACY, [0, 1], False),
            (stats_world.P.SOCKET, [0, 1], True),
            (stats_world.P.SOCKET, [0, None], False),
            (stats_world.P.SOCKET, [0, 2], False),
            (stats_world.P.PREFERRED, [2, None], True),
        ]
        for policy, nodes, fits in table:
            w = stats_world.World()
            for node in nodes:
                w.dev(stats_world.T.SRIOV_VF, numa_node=node)
            self.assertEqual(fits, w.stats().support_requests(
                [stats_world.req(2, policy=policy, dev_type=stats_world.T.SRIOV_VF)], stats_world.cells(0)),
                (policy, nodes))

    def test_empty_cell_list_means_no_numa_topology(self):
        w = stats_world.World()
        w.dev(stats_world.T.SRIOV_VF, numa_node=2)
        self.assertTrue(w.stats().support_requests(
            [stats_world.req(policy=stats_world.P.REQUIRED, dev_type=stats_world.T.SRIOV_VF)], []))


ANYWHERE = ' on any NUMA node (the instance has no NUMA topology)'


class TestExplain(testtools.TestCase):

    def test_numa_line_names_alias_type_node_and_policy(self):
        w = stats_world.World()
        w.gpu(numa_node=0, slots=3)
        stats = w.stats()
        vgpu = stats_world.req(1, alias='vGPU', vendor_id='10de', mdev_type='nvidia-35',
                               dev_type=stats_world.T.MDEV_VF, policy=stats_world.P.REQUIRED)
        self.assertEqual(
            ['alias vGPU: 0 free nvidia-35 slots matching vendor_id=10de on '
             'NUMA node 1, policy required, 1 requested; '
             '3 free on NUMA node 0; '
             'free per parent: 0000:00:00.1 on NUMA node 0: 3'],
            stats.explain([vgpu], stats_world.cells(1)))

    def test_in_use_devices_are_counted(self):
        w = stats_world.World()
        gpus = [w.gpu(product_id='1eb8', slots=1) for _ in range(2)]
        stats = w.stats()
        for _, (slot,) in gpus:
            slot.claim(stats_world.INST)
            stats.add_device(slot)
            stats.add_device(slot.parent_device)
        whole = stats_world.req(1, alias='gpu-whole', vendor_id='10de',
                                product_id='1eb8', dev_type=stats_world.T.MDEV_PF)
        self.assertEqual(
            ['alias gpu-whole: 0 free mdev-pf devices matching '
             'vendor_id=10de, product_id=1eb8 on any NUMA node (the '
             'instance has no NUMA topology) (2 exist but are in use), '
             '1 requested'], stats.explain([whole]))

    def test_consumed_devices_and_dependants_count_as_in_use(self):
        w = stats_world.World()
        w.gpu(slots=1)
        stats = w.stats()
        stats.consume_requests([stats_world.req(mdev_type='nvidia-35')])
        lines = stats.explain([stats_world.req(alias='s', mdev_type='nvidia-35'),
                               stats_world.req(alias='p', dev_type=stats_world.T.MDEV_PF)])
        self.assertEqual(
            ['alias s: 0 free nvidia-35 slots%s (1 exist but are in use), '
             '1 requested' % ANYWHERE,
             'alias p: 0 free mdev-pf devices%s (1 exist but are in use), '
             '1 requested' % ANYWHERE], lines)

    def test_each_failing_request_gets_a_line_and_earlier_takes_count(self):
        w = stats_world.World()
        w.gpu(slots=1)
        stats = w.stats()
        first = stats_world.req(1, alias='one', mdev_type='nvidia-35')
        second = stats_world.req(1, alias='two', mdev_type='nvidia-35')
        nameless = objects.InstancePCIRequest(
            count=1, spec=[{'mdev_type': 'nvidia-99'}],
            requester_id='port-1')
        self.assertEqual(
            ['alias two: 0 free nvidia-35 slots%s, 1 requested; 1 taken by '
             'earlier requests of this call' % ANYWHERE,
             'requester port-1: 0 free nvidia-99 slots%s, 1 requested'
             % ANYWHERE],
            stats.explain([first, second, nameless]))

    def test_parent_pools_are_mentioned_when_dev_type_is_missing(self):
        w = stats_world.World()
        w.nic(vfs=0)
        line, = w.stats().explain([stats_world.req(1, alias='nic', vendor_id='8086')])
        self.assertIn('1 free devices also match but serve only requests '
                      'naming device_type type-PF', line)

    def test_socket_and_legacy_wording(self):
        stats = stats_world.World().stats()
        for policy, where in [
                (stats_world.P.SOCKET, 'on socket 1 (NUMA node 2), policy socket'),
                (stats_world.P.LEGACY, 'on NUMA node 2 or without NUMA affinity'),
                (stats_world.P.PREFERRED, 'on any NUMA node (preferring NUMA node 2)')]:
            line, = stats.explain([stats_world.req(policy=policy)], stats_world.cells(2))
            self.assertIn(where, line)

    def test_consume_failure_message_is_the_explanation(self):
        stats = stats_world.World().stats()
        err = self.assertRaises(exception.PciDeviceRequestFailed,
                                stats.consume_requests,
                                [stats_world.req(alias='vGPU', mdev_type='nvidia-35')])
        self.assertIn('alias vGPU: 0 free nvidia-35 slots', str(err))


class TestConsume(testtools.TestCase):

    def test_consuming_a_child_removes_its_parent(self):
        for make in (stats_world.World.gpu, stats_world.World.nic):
            w = stats_world.World()
            parent, kids = make(w)
            stats = w.stats()
            child_type = kids[0].dev_type
            got = stats.consume_requests([stats_world.req(dev_type=child_type)])
            self.assertEqual([kids[0]], got)
            self.assertEqual([kids[1]], stats.devices())
            self.assertFalse(stats.support_requests(
                [stats_world.req(dev_type=parent.dev_type)]))
            self.assertEqual(stats_world.S.AVAILABLE, got[0].status)

    def test_consuming_a_parent_removes_all_children(self):
        for make in (stats_world.World.gpu, stats_world.World.nic):
            w = stats_world.World()
            parent, kids = make(w)
            other_parent, other_kids = make(w)
            stats = w.stats()
            got = stats.consume_requests([stats_world.req(dev_type=parent.dev_type)])
            self.assertEqual([parent], got)
            self.assertEqual({other_parent.address} |
                             {k.address for k in other_kids},
                             {d.address for d in stats.devices()})

    def test_never_a_parent_and_its_child_in_one_call(self):
        w = stats_world.World()
        parent, kids = w.gpu(slots=2)
        stats = w.stats()
        both = [stats_world.req(dev_type=stats_world.T.MDEV_PF), stats_world.req(dev_type=stats_world.T.MDEV_VF)]
        self.assertFalse(stats.support_requests(both))
        before = stats_world.snapshot(stats)
        self.assertRaises(exception.PciDeviceRequestFailed,
                          stats.consume_requests, both)
        self.assertEqual(before, stats_world.snapshot(stats))
        other, other_kids = w.gpu(slots=1)
        stats.add_device(other)
        stats.add_device(other_kids[0])
        got = stats.consume_requests(both)
        self.assertEqual(2, len(got))
        self.assertIsNot(got[0], got[1].parent_device)

    def test_failure_changes_nothing(self):
        w = stats_world.World()
        w.gpu(numa_node=1, slots=2)
        w.nic(numa_node=0, vfs=2)
        stats = w.stats()
        before = stats_world.snapshot(stats)
        fits = stats_world.req(1, dev_type=stats_world.T.SRIOV_VF)
        too_many = stats_world.req(3, mdev_type='nvidia-35')
        self.assertRaises(exception.PciDeviceRequestFailed,
                          stats.consume_requests, [fits, too_many])
        self.assertEqual(before, stats_world.snapshot(stats))

    def test_support_requests_has_no_side_effects(self):
        w = stats_world.World()
        w.gpu(numa_node=1, slots=2)
        stats = w.stats()
        before = stats_world.snapshot(stats)
        request = stats_world.req(2, mdev_type='nvidia-35')
        for _ in range(3):
            self.assertTrue(stats.support_requests([request], stats_world.cells(1)))
            self.assertEqual([], stats.explain([request], stats_world.cells(1)))
        self.assertEqual(before, stats_world.snapshot(stats))

    def test_take_pairs_devices_with_requests_and_changes_no_device(self):
        w = stats_world.World()
        w.gpu(slots=3)
        stats = w.stats()
        one = stats_world.req(1, mdev_type='nvidia-35')
        two = stats_world.req(2, mdev_type='nvidia-35')
        picks = stats.take_requests([two, one])
        self.assertEqual([two, two, one], [r for r, _dev in picks])
        self.assertEqual(3, len({dev.address for _r, dev in picks}))
        for _request, dev in picks:
            self.assertIsNone(dev.request_id)
            self.assertEqual(stats_world.S.AVAILABLE, dev.status)

    def test_issue_acceptance_numa_cell_one(self):
        w = stats_world.World()
        w.gpu(numa_node=0, slots=2)
        _, slots_on_1 = w.gpu(numa_node=1, slots=1)
        stats = w.stats()
        vgpu = stats_world.req(1, alias='vGPU', vendor_id='10de', mdev_type='nvidia-35',
                               dev_type=stats_world.T.MDEV_VF, policy=stats_world.P.REQUIRED)
        self.assertEqual(slots_on_1, stats.consume_requests([vgpu],
                                                            stats_world.cells(1)))
        err = self.assertRaises(exception.PciDeviceRequestFailed,
                                stats.consume_requests, [vgpu], stats_world.cells(1))
        self.assertIn('0 free nvidia-35 slots matching vendor_id=10de on '
                      'NUMA node 1, policy required', str(err))
        self.assertEqual({(stats_world.T.MDEV_PF, 'nvidia-35', 0): 1,
                          (stats_world.T.MDEV_VF, 'nvidia-35', 0): 2}, stats_world.counts(stats))


# -- property: pools hold exactly the free devices -----------------------

def _build_property_world():
    w = stats_world.World()
    w.gpu(numa_node=0, slots=3, existing=1)
    w.gpu(numa_node=1, slots=2)
    w.nic(numa_node=1, vfs=3)
    w.dev(stats_world.T.STANDARD, numa_node=None)
    return w


_SPECS = [{'dev_type': t} for t in stats_world.T.ALL] + [{'mdev_type': 'nvidia-35'}]
_OPS = st.lists(st.one_of(
    st.tuples(st.just('add'), st.integers(0, 11)),
    st.tuples(st.just('remove'), st.integers(0, 11)),
    st.tuples(st.just('consume'), st.integers(0, len(_SPECS) - 1),
              st.integers(1, 3), st.sampled_from([None, (0,), (1,)]),
              st.sampled_from(stats_world.P.ALL)),
    st.tuples(st.just('free'), st.integers(0, 11)),
), max_size=40)


class TestPoolProperty(testtools.TestCase):

    @settings(max_examples=150, deadline=None)
    @given(_OPS)
    def test_pools_hold_exactly_the_present_available_devices(self, ops):
        w = _build_property_world()
        devs = w.devices
        stats = w.stats()
        present = set(range(len(devs)))
        for op in ops:
            if op[0] == 'add':
                present.add(op[1])
                stats.add_device(devs[op[1]])
            elif op[0] == 'remove':
                present.discard(op[1])
                stats.remove_device(devs[op[1]])
            elif op[0] == 'consume':
                _, spec, count, cell_ids, policy = op
                request = stats_world.req(count, policy=policy, **_SPECS[spec])
                numa_cells = stats_world.cells(*cell_ids) if cell_ids else None
                before = stats_world.snapshot(stats)
                try:
                    got = stats.consume_requests([request], numa_cells)
                except exception.PciDeviceRequestFailed:
                    self.assertEqual(before, stats_world.snapshot(stats))
                    continue
                self.assertEqual(count, len(got))
                for dev in got:
                    dev.claim(stats_world.INST)      # raises if parent/child collide
            elif op[0] == 'free':
                dev = devs[op[1]]
                if dev.status == stats_world.S.CLAIMED:
                    for freed in dev.free(stats_world.INST):
                        if devs.index(freed) in present:
                            stats.add_device(freed)
            expected = {devs[i].address for i in present
                        if devs[i].status == stats_world.S.AVAILABLE}
            held = stats.devices()
            self.assertEqual(expected, {d.address for d in held})
            self.assertEqual(len(held), len(expected))
            self.assertEqual(len(held),
                             sum(p.count for p in stats.to_pool_list()))
            by_key = collections.Counter(
                (d.dev_type, d.mdev_type, d.numa_node) for d in held)
            self.assertEqual(dict(by_key), stats_world.counts(stats))


# -- scale ------------------------------------------------------------------

def consume_cycles(devices, rounds):
    """A callable doing ``rounds`` consume + claim + free + re-add cycles
    over ``devices`` slots (the world is built outside it)."""
    w = stats_world.World()
    per_parent = 16
    for i in range(devices // per_parent):
        w.gpu(numa_node=i % 2, slots=per_parent)
    stats = w.stats()
    request = stats_world.req(1, mdev_type='nvidia-35', policy=stats_world.P.REQUIRED)

    def cycles():
        for _ in range(rounds):
            dev, = stats.consume_requests([request], stats_world.cells(1))
            dev.claim(stats_world.INST)                 # what the tracker does
            for freed in dev.free(stats_world.INST):
                stats.add_device(freed)
        return stats
    return cycles


class TestScale(testtools.TestCase):

    def test_a_cycle_costs_the_same_on_a_larger_host(self):
        # Calls per cycle, with 8x the devices: flat (O(pools) per
        # request, O(1) per device touched).
        per_cycle = [opcount.calls(consume_cycles(n, 20))[1] / 20
                     for n in (160, 1280)]
        self.assertLess(per_cycle[1] / per_cycle[0], 1.2, per_cycle)

    def test_cycles_keep_the_pools(self):
        stats = consume_cycles(160, 20)()
        self.assertEqual({(stats_world.T.MDEV_PF, 'nvidia-35', 0): 5,
                          (stats_world.T.MDEV_PF, 'nvidia-35', 1): 5,
                          (stats_world.T.MDEV_VF, 'nvidia-35', 0): 80,
                          (stats_world.T.MDEV_VF, 'nvidia-35', 1): 80}, stats_world.counts(stats))


class TestServingMemo(testtools.TestCase):
    """pools.Ordered remembers which pools serve a spec until a pool is
    added or dropped (a pool's key, all that serves() reads, never
    changes)."""

    def test_a_new_pool_is_seen_by_a_remembered_spec(self):
        w = stats_world.World()
        w.gpu(numa_node=0, slots=1)
        stats = w.stats()
        vgpu = [stats_world.req(1, dev_type=stats_world.T.MDEV_VF, vendor_id='10de')]
        self.assertEqual({0: 1}, stats.free_by_numa_node(vgpu))
        self.assertTrue(stats.support_requests(vgpu * 1, stats_world.cells(0)))
        self.assertFalse(stats.support_requests(vgpu, stats_world.cells(2)))
        # A new pool (another NUMA node) after the spec was remembered.
        _, kids = w.gpu(numa_node=2, slots=1)
        stats.add_device(kids[0])
        self.assertTrue(stats.support_requests(vgpu, stats_world.cells(2)))
        # Its pool emptied and dropped: the spec no longer sees it.
        stats.remove_device(kids[0])
        self.assertFalse(stats.support_requests(vgpu, stats_world.cells(2)))
        self.assertTrue(stats.support_requests(vgpu, stats_world.cells(0)))

    def test_equal_specs_share_an_answer_and_others_get_their_own(self):
        w = stats_world.World()
        w.gpu(numa_node=0, slots=1, mdev_type='nvidia-35')
        w.gpu(numa_node=0, slots=1, mdev_type='nvidia-36')
        stats = w.stats()
        for mdev_type in ('nvidia-35', 'nvidia-36', 'nvidia-35'):
            got = stats.consume_requests([stats_world.req(
                1, dev_type=stats_world.T.MDEV_VF, mdev_type=mdev_type)])
            self.assertEqual([mdev_type], [d.mdev_type for d in got])
            stats.add_device(got[0])       # still available: back again

    def test_unhashable_spec_values_are_answered_not_remembered(self):
        from nova_pci_mdev.pci import pools
        self.assertIsNone(pools.spec_key([{'traits': ['A']}]))
        self.assertEqual(pools.spec_key([{'a': '1', 'b': '2'}]),
                         pools.spec_key([{'b': '2', 'a': '1'}]))
        w = stats_world.World()
        w.dev(stats_world.T.STANDARD)
        order = pools.Ordered(w.stats()._pools)
        # (InstancePCIRequest refuses such values; a duck-typed request
        # may carry them.)
        request = types.SimpleNamespace(
            spec=[{'dev_type': stats_world.T.STANDARD, 'traits': ['A']}])
        self.assertEqual(1, len(order.serving(request)))
        self.assertEqual({}, order._serving)

    def test_at_most_so_many_specs_are_remembered(self):
        from nova_pci_mdev.pci import pools
        w = stats_world.World()
        w.dev(stats_world.T.STANDARD)
        order = pools.Ordered(w.stats()._pools)
        for n in range(pools.Ordered.SPECS_REMEMBERED + 5):
            order.serving(stats_world.req(1, label='l%d' % n))
        self.assertLessEqual(len(order._serving),
                             pools.Ordered.SPECS_REMEMBERED)
