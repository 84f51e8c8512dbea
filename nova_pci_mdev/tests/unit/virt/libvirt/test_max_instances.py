"""``max_instances``: one meaning per option, as in Nova (issue 27).

``[mdev_<type>] max_instances`` limits the type's mdevs per host (Nova's
Placement-path budget); the ``[pci] device_spec`` key ``max_instances``
limits them per parent. nova-pci-mdev read the group option per parent
before: a configuration without the device_spec key for the type keeps
that reading where the two differ, and ``check-config`` warns.

Discovery runs on a fake host through the real Settings::

    NUMA 0: T4 0000:84:00.0 nvidia-222 x16        (no mdev)
    NUMA 1: T4 0000:85:00.0 nvidia-222 x16        2 mdevs exist
    NUMA 0: L40S-like PF 0000:41:00.0, 4 VFs taking nvidia-1150
    NUMA 1: L40S-like PF 0000:42:00.0, 4 VFs taking nvidia-1150
"""

import os

import fixtures
import testscenarios
import testtools

from nova_pci_mdev import conf
from nova_pci_mdev.conf import host_checks
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import slots
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

GPU1, GPU2 = '0000:84:00.0', '0000:85:00.0'
MDEVS = ('4b20d080-1b54-4048-85b3-a6a62d165c01',
         '4b20d080-1b54-4048-85b3-a6a62d165c02')
L40S = ('0000:41:00.0', '0000:42:00.0')

# name, parents [(existing, available, own limit)], host limit, per host,
# expected (creatable per parent, deprecated)
LIMIT_CASES = [
    ('no limit', [(0, 16, None), (2, 14, None)], None, False,
     ([16, 14], False)),
    ('own limits only', [(0, 16, 4), (2, 14, 4)], None, True,
     ([4, 2], False)),
    ('per host: the budget in address order', [(0, 16, None), (0, 16, None)],
     20, True, ([16, 4], False)),
    ('per host: existing slots first', [(3, 13, None), (2, 14, None)], 8,
     True, ([3, 0], False)),
    ('per host: existing beyond the limit are kept', [(10, 6, None)], 4,
     True, ([0], False)),
    ('per host within own limits', [(0, 16, 4), (0, 16, 4)], 6, True,
     ([4, 2], False)),
    ('A100 VF parents per host', [(0, 1, None)] * 16, 4, True,
     ([1] * 4 + [0] * 12, False)),
    ('old reading, one parent: the same', [(0, 16, None)], 8, False,
     ([8], False)),
    ('old reading, under the limit: the same', [(0, 2, None), (0, 3, None)],
     8, False, ([2, 3], False)),
    ('old reading kept where it differs', [(0, 16, None), (0, 16, None)], 8,
     False, ([8, 8], True)),
    ('A100 VF parents, old reading kept', [(0, 1, None)] * 16, 4, False,
     ([1] * 16, True)),
]


class TypeLimitsTest(testscenarios.WithScenarios, testtools.TestCase):

    scenarios = [(name, dict(parents=parents, limit=limit, per_host=per_host,
                             want=want))
                 for name, parents, limit, per_host, want in LIMIT_CASES]

    def test_limits(self):
        self.assertEqual(self.want, slots.type_limits(
            self.parents, self.limit, self.per_host))


ALL = 'device_spec = {"vendor_id": "10de"}'
BASE = """
[pci]
%s
[devices]
enabled_mdev_types = nvidia-222, nvidia-1150
%s
"""


def host():
    fake = fakelibvirt.FakeHost('cn1', cells=2)
    fake.add_mdev_parent(GPU1, numa_node=0, types={'nvidia-222': 16})
    fake.add_mdev_parent(GPU2, numa_node=1, types={'nvidia-222': 16})
    for uuid in MDEVS:
        fake.add_mdev(uuid, GPU2, 'nvidia-222')
    return host_mod.Host(fake.connect(), libvirt=fake.libvirt,
                         nodename='cn1')


class DiscoveryTest(testtools.TestCase):
    """Slots per T4 (existing + creatable) for each configuration."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def settings(self, spec='', group='', catch_all=ALL):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(BASE % (spec + '\n' + catch_all, group))
        return conf.load_settings(conf.new_config([path]))

    def slots(self, settings):
        records = host().discover(settings)
        by_address = {r['address']: r for r in records}
        got = {}
        for gpu in (GPU1, GPU2):
            existing = sum(1 for r in records if r['parent_addr'] == gpu)
            got[gpu] = existing + capacity.creatable(by_address[gpu])
        warnings = [str(p) for p in host_checks.problems(
            settings, records, 'cn1') if 'max_instances' in str(p)]
        return got, warnings

    def test_group_option_alone_keeps_the_per_parent_reading(self):
        got, (warning,) = self.slots(self.settings(
            group='[mdev_nvidia-222]\nmax_instances = 8'))
        self.assertEqual({GPU1: 8, GPU2: 8}, got)
        self.assertEqual(
            '[mdev_nvidia-222] max_instances = 8: read per mdev parent on '
            'host cn1 (16 slots of nvidia-222 in all), nova-pci-mdev\'s '
            'meaning so far, which is deprecated: Nova reads it per host, '
            'the limit of the Placement path (8 slots here). For a limit per '
            'parent write "max_instances": N in the [pci] device_spec entry '
            'with "mdev_type": "nvidia-222"; [mdev_nvidia-222] '
            'max_instances is then read per host (warning)', warning)
        # Where both readings agree, nothing to warn about.
        got, warnings = self.slots(self.settings(
            group='[mdev_nvidia-222]\nmax_instances = 40'))
        self.assertEqual({GPU1: 16, GPU2: 16}, got)
        self.assertEqual([], warnings)

    def test_device_spec_key_makes_the_group_option_per_host(self):
        got, warnings = self.slots(self.settings(
            spec='device_spec = {"mdev_type": "nvidia-222", '
                 '"max_instances": 6}',
            group='[mdev_nvidia-222]\nmax_instances = 8'))
        # Each T4 at most 6; the host at most 8, GPU2's 2 mdevs first.
        self.assertEqual({GPU1: 6, GPU2: 2}, got)
        self.assertEqual([], warnings)
        # A parent no spec covers (never handed out) is out of the budget:
        # GPU2 takes the host's 10, GPU1 shows at most 10 of its own.
        got, _warnings = self.slots(self.settings(
            spec='device_spec = {"address": "%s", "mdev_type": '
                 '"nvidia-222", "max_instances": 16}' % GPU2,
            group='[mdev_nvidia-222]\nmax_instances = 10', catch_all=''))
        self.assertEqual({GPU1: 10, GPU2: 10}, got)

    def test_device_spec_key_alone_limits_each_parent(self):
        got, warnings = self.slots(self.settings(
            spec='device_spec = {"vendor_id": "10de", "mdev_type": '
                 '"nvidia-*", "max_instances": "5"}'))
        self.assertEqual({GPU1: 5, GPU2: 5}, got)
        self.assertEqual([], warnings)


class NvidiaVfTest(testtools.TestCase):
    """The same rules on GPUs whose vGPUs are their VFs (per GPU)."""

    def records(self, settings):
        records, states = [], {}
        for node, pf in enumerate(L40S):
            records.append({'address': pf, 'dev_type': 'type-PF',
                            'vendor_id': '10de', 'product_id': '26b9',
                            'parent_addr': None, 'mdev_type': None,
                            'numa_node': node, 'extra_info': {}})
            for vf in range(4):
                address = pf[:-1] + str(vf + 4)
                records.append({'address': address, 'dev_type': 'type-VF',
                                'vendor_id': '10de', 'product_id': '26b9',
                                'parent_addr': pf, 'mdev_type': None,
                                'numa_node': node, 'extra_info': {}})
                states[address] = nvidia_vf.VfState(address, 0, (
                    nvidia_vf.VgpuType(1150, 'NVIDIA L40S-4Q'),))
        out = nvidia_vf.apply(records, states, settings)
        return {pf: sum(1 for r in out if r['parent_addr'] == pf
                        and nvidia_vf.is_vgpu_slot(r)) for pf in L40S}, out

    def settings(self, spec, group):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(BASE % (spec + '\n' + ALL, group))
        return conf.load_settings(conf.new_config([path]))

    def test_per_gpu_reading_kept_without_the_device_spec_key(self):
        settings = self.settings('', '[mdev_nvidia-1150]\nmax_instances = 3')
        got, out = self.records(settings)
        self.assertEqual({L40S[0]: 3, L40S[1]: 3}, got)
        self.assertEqual(1, sum(
            1 for p in host_checks.problems(settings, out, 'cn1')
            if 'max_instances' in str(p)))

    def test_per_host_with_the_device_spec_key(self):
        got, _out = self.records(self.settings(
            'device_spec = {"mdev_type": "nvidia-1150", "max_instances": 4}',
            '[mdev_nvidia-1150]\nmax_instances = 6'))
        self.assertEqual({L40S[0]: 4, L40S[1]: 2}, got)

    def test_the_host_check_reads_the_vgpu_vfs_current_type(self):
        self.assertEqual(nvidia_vf.EXTRA_CURRENT, host_checks.VGPU_CURRENT)
