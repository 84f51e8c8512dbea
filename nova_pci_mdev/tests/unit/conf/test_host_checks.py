"""conf.host_checks: the mdev parents of one physical GPU and Placement.

Records of an SR-IOV GPU (PF 0000:41:00.0, VF parents 0000:41:00.4-.7)
and a GPU without SR-IOV (0000:84:00.0); Placement gets one provider per
physical GPU, so the VF parents of one PF must expose one type and class.
"""

from nova_pci_mdev import conf
from nova_pci_mdev.conf import host_checks
from nova_pci_mdev.tests.fixtures import tracker_world as world
from nova_pci_mdev.tests.unit.conf import base

T = world.T
PF = '0000:41:00.0'
VFS = ('0000:41:00.4', '0000:41:00.5', '0000:41:00.6', '0000:41:00.7')
T4 = '0000:84:00.0'
CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
[devices]
enabled_mdev_types = nvidia-699, nvidia-700, nvidia-222
"""


def records(types, rcs=None, t4_type='nvidia-222'):
    """The host; ``types``/``rcs`` give each VF parent's type/class."""
    rcs = rcs or {}
    gpu = dict(vendor_id='10de', product_id='20b5')
    out = [world.record(PF, T.SRIOV_PF, **gpu)]
    for vf, mdev_type in zip(VFS, types):
        out.append(world.record(vf, T.MDEV_PF, parent_addr=PF,
                                mdev_type=mdev_type, creatable='1',
                                resource_class=rcs.get(vf, 'VGPU'), **gpu))
    out.append(world.record(T4, T.MDEV_PF, vendor_id='10de',
                            product_id='1eb8', mdev_type=t4_type,
                            resource_class='VGPU', creatable='4'))
    return out


ONE = ('nvidia-699',) * 4
ODD = ('nvidia-699', 'nvidia-700', 'nvidia-699', 'nvidia-700')

# name, extra config, VF types, VF classes, expected problems
CASES = [
    ('one type: fine', '', ONE, None, []),
    ('a VF without type is no parent of the provider', '',
     ('nvidia-699', None, 'nvidia-699', 'nvidia-699'), None, []),
    ('two types set apart by device_addresses',
     '[mdev_nvidia-700]\ndevice_addresses = 0000:41:00.7, 0000:41:00.5\n',
     ODD, None,
     ['[mdev_nvidia-700] device_addresses = 0000:41:00.5, 0000:41:00.7: '
      'physical device 0000:41:00.0 on host cn1: its mdev parents expose '
      'nvidia-699 (VGPU) on 0000:41:00.4, 0000:41:00.6; nvidia-700 (VGPU) '
      'on 0000:41:00.5, 0000:41:00.7; Placement gets one provider per '
      'physical GPU, so all mdev parents of one GPU must expose the same '
      'mdev type and resource class (list them all in one [mdev_<type>] '
      'device_addresses)']),
    ('two types, no device_addresses', '', ODD, None,
     ['[devices] enabled_mdev_types = nvidia-699, nvidia-700: physical '
      'device 0000:41:00.0 on host cn1: its mdev parents expose']),
    ('one type, two classes', '', ONE, {VFS[2]: 'CUSTOM_X'},
     ['[devices] enabled_mdev_types = nvidia-699: physical device '
      '0000:41:00.0 on host cn1: its mdev parents expose nvidia-699 '
      '(CUSTOM_X) on 0000:41:00.6; nvidia-699 (VGPU) on 0000:41:00.4, ']),
]


class MixedGpuTest(base.ConfTestCase):

    def test_cases(self):
        for name, extra, types, rcs, want in CASES:
            settings = conf.load_settings(self.load(CONF + extra))
            got = [str(p) for p in host_checks.problems(
                settings, records(types, rcs), 'cn1')
                if 'physical device' in str(p)]
            self.assertEqual(len(want), len(got), (name, got))
            for text, problem in zip(want, got):
                self.assertTrue(problem.startswith(text),
                                '%s: %s' % (name, problem))

    def test_only_whitelisted_parents_count(self):
        def problems(first, second):
            settings = conf.load_settings(self.load(CONF.replace(
                'device_spec = {"vendor_id": "10de"}',
                'device_spec = {"address": "%s"}\n'
                'device_spec = {"address": "%s"}' % (first, second))))
            host = records(ODD)
            self.assertEqual([first, second], [
                r['address'] for r in host
                if settings.whitelist.match(r) is not None])
            return [str(p) for p in host_checks.problems(
                settings, host, 'cn1') if 'physical device' in str(p)]

        # .4 and .6 expose nvidia-699, .5 nvidia-700.
        self.assertEqual([], problems(VFS[0], VFS[2]))
        (problem,) = problems(VFS[0], VFS[1])
        self.assertIn('nvidia-699 (VGPU) on 0000:41:00.4; nvidia-700 (VGPU) '
                      'on 0000:41:00.5;', problem)
