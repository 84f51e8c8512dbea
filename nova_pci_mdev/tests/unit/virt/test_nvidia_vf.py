"""The pure model of NVIDIA vGPU VFs: file contents, type names, records.

GPU used by the record tests (an L40S-like GPU, 48 GB, 4 VFs here)::

    PF 0000:41:00.0 (type-PF, NUMA 1)
      VF 0000:41:00.4  0000:41:00.5  0000:41:00.6  0000:41:00.7
    types: 1150 L40S-4Q (4 GB), 1155 L40S-24Q (24 GB), 1156 L40S-48Q
"""

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.conf import mdev as conf_mdev
from nova_pci_mdev.conf import settings as settings_mod
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

PF = '0000:41:00.0'
VFS = ['0000:41:00.4', '0000:41:00.5', '0000:41:00.6', '0000:41:00.7']
Q4 = nvidia_vf.VgpuType(1150, 'NVIDIA L40S-4Q')
Q24 = nvidia_vf.VgpuType(1155, 'NVIDIA L40S-24Q')
Q48 = nvidia_vf.VgpuType(1156, 'NVIDIA L40S-48Q')
REAL_FILE = """ID    : vGPU Name
1145  : NVIDIA L40S-1B
1147  : NVIDIA L40S-1Q
2164  : NVIDIA L40S-3B
"""


def settings(*types, **options):
    """Settings enabling ``types`` (``[mdev_<type>]`` options for all)."""
    return settings_mod.Settings(
        enabled_mdev_types=tuple(types),
        mdev_types={t: conf_mdev.MdevTypeOptions(mdev_type=t, **options)
                    for t in types})


def record(address, dev_type='type-VF', parent=PF):
    return {'address': address, 'vendor_id': '10de', 'product_id': '26b9',
            'dev_type': dev_type, 'numa_node': 1,
            'parent_addr': parent if dev_type == 'type-VF' else None,
            'mdev_type': None, 'label': 'label_10de_26b9',
            'dev_id': 'pci_' + address, 'extra_info': {}}


def gpu_records():
    return [record(PF, 'type-PF')] + [record(v) for v in VFS]


def free(address, *types):
    return nvidia_vf.VfState(address, 0, types)


class TestFiles(testtools.TestCase):

    def test_creatable_as_the_driver_writes_it(self):
        types = nvidia_vf.parse_creatable(REAL_FILE, 'f')
        self.assertEqual(
            [(1145, 'NVIDIA L40S-1B'), (1147, 'NVIDIA L40S-1Q'),
             (2164, 'NVIDIA L40S-3B')],
            [(t.id, t.name) for t in types])
        self.assertEqual(['nvidia-1145', 'nvidia-1147', 'nvidia-2164'],
                         [t.mdev_type for t in types])

    def test_creatable_header_only_or_empty_is_no_type(self):
        for text in ('ID    : vGPU Name\n', '', '\n\n'):
            self.assertEqual((), nvidia_vf.parse_creatable(text, 'f'))

    def test_creatable_round_trip(self):
        types = (Q4, Q24, nvidia_vf.VgpuType(7, 'x'))
        self.assertEqual(types, nvidia_vf.parse_creatable(
            nvidia_vf.format_creatable(types), 'f'))

    def test_creatable_bad_lines_name_the_file_and_line(self):
        for line in ('1147 NVIDIA L40S-1Q', 'abc : name', '1147 :',
                     '-1 : x', '0 : zero', '99999999999 : big',
                     '1147 : bell\x07', '1147 : ' + 'x' * 129,
                     '1147 : caf\u00e9'):
            exc = self.assertRaises(
                exception.VgpuVfError, nvidia_vf.parse_creatable,
                'ID : vGPU Name\n1150 : ok\n' + line + '\n', '/sys/x')
            self.assertIn('/sys/x', str(exc))
            self.assertIn('line 3', str(exc))

    def test_current(self):
        for text, value in (('0\n', 0), ('1150\n', 1150), (' 7 ', 7),
                            ('4294967295', nvidia_vf.MAX_TYPE_ID)):
            self.assertEqual(value, nvidia_vf.parse_current(text, 'f'))
        for text in ('', 'none', '-1', '0x10', '4294967296', '1 2', None):
            exc = self.assertRaises(exception.VgpuVfError,
                                    nvidia_vf.parse_current, text, '/p')
            self.assertIn('/p', str(exc))
            self.assertIn('current_vgpu_type', str(exc))


class TestTypeNames(testtools.TestCase):

    def test_good(self):
        self.assertEqual(1150, nvidia_vf.type_id_of('nvidia-1150'))
        self.assertEqual('nvidia-1150', nvidia_vf.type_name(1150))
        self.assertEqual(nvidia_vf.MAX_TYPE_ID,
                         nvidia_vf.type_id_of('nvidia-4294967295'))

    def test_hostile_or_bad_names_are_refused_naming_the_rule(self):
        for value in ('nvidia-0', 'nvidia-01150', 'nvidia-1150\n',
                      'nvidia-1150 ', 'nvidia--1', 'nvidia-+1', '1150',
                      'nvidia-4294967296', 'nvidia-1150/../../x',
                      'NVIDIA-1150', 'nvidia-\u0661', 'nvidia-35x', None,
                      1150, 'mtty-1'):
            exc = self.assertRaises(exception.InvalidValue,
                                    nvidia_vf.type_id_of, value)
            self.assertIn('nvidia-<id>', str(exc))
            self.assertFalse(nvidia_vf.is_vgpu_type(value))

    def test_bad_ids(self):
        for value in (0, -1, 2 ** 32, True, '1150', 1.0):
            self.assertRaises(exception.InvalidValue, nvidia_vf.type_name,
                              value)


class TestApply(testtools.TestCase):

    def by_address(self, records):
        return {r['address']: r for r in records}

    def test_free_gpu_every_vf_listing_the_type_is_a_slot(self):
        states = {v: free(v, Q4, Q24, Q48) for v in VFS}
        out = self.by_address(nvidia_vf.apply(
            gpu_records(), states, settings('nvidia-1150')))
        pf = out[PF]
        self.assertEqual(('type-PF', 'nvidia-1150'),
                         (pf['dev_type'], pf['mdev_type']))
        self.assertEqual({'vgpu_framework': 'nvidia-vfio', 'whole': 'false',
                          'supported_mdev_types':
                              'nvidia-1150,nvidia-1155,nvidia-1156',
                          'resource_class': 'VGPU'}, pf['extra_info'])
        for vf in VFS:
            self.assertEqual(('type-VF', 'nvidia-1150', PF, 1),
                             (out[vf]['dev_type'], out[vf]['mdev_type'],
                              out[vf]['parent_addr'], out[vf]['numa_node']))
            self.assertEqual(
                {'vgpu_framework': 'nvidia-vfio', 'vgpu_current': '',
                 'vgpu_creatable': 'nvidia-1150,nvidia-1155,nvidia-1156',
                 'mdev_exposed': 'true'}, out[vf]['extra_info'])
            self.assertTrue(nvidia_vf.is_vgpu_slot(out[vf]))

    def test_capacity_is_what_sysfs_lists_now(self):
        # Two 24Q exist (VFs 0 and 1): the GPU is full, the others list
        # nothing; the holders are slots, in use or not.
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1155),
                  VFS[1]: nvidia_vf.VfState(VFS[1], 1155),
                  VFS[2]: free(VFS[2]), VFS[3]: free(VFS[3])}
        out = self.by_address(nvidia_vf.apply(
            gpu_records(), states, settings('nvidia-1155')))
        self.assertEqual(
            [('nvidia-1155', 'true', 'nvidia-1155'),
             ('nvidia-1155', 'true', 'nvidia-1155'),
             (None, 'false', ''), (None, 'false', '')],
            [(out[v]['mdev_type'], out[v]['extra_info']['mdev_exposed'],
              out[v]['extra_info']['vgpu_current']) for v in VFS])
        self.assertEqual('nvidia-1155', out[PF]['mdev_type'])

    def test_one_size_at_a_time_shows_as_no_slot_of_another_size(self):
        # A 24Q set by hand on VF 0: the driver offers 24 GB types only.
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1155)}
        states.update({v: free(v, Q24) for v in VFS[1:]})
        out = self.by_address(nvidia_vf.apply(
            gpu_records(), states, settings('nvidia-1150',
                                            device_addresses=(PF,))))
        self.assertEqual('nvidia-1150', out[PF]['mdev_type'])
        self.assertEqual(['nvidia-1155', None, None, None],
                         [out[v]['mdev_type'] for v in VFS])
        self.assertEqual({'false'}, {out[v]['extra_info']['mdev_exposed']
                                     for v in VFS})
        self.assertEqual('nvidia-1155', out[PF]['extra_info'][
            'supported_mdev_types'])

    def test_max_instances_caps_free_vfs_never_holders(self):
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1150),
                  VFS[1]: nvidia_vf.VfState(VFS[1], 1150)}
        states.update({v: free(v, Q4) for v in VFS[2:]})
        for cap, slots in ((3, VFS[:3]), (1, VFS[:2]), (None, VFS)):
            out = nvidia_vf.apply(gpu_records(), states, settings(
                'nvidia-1150', max_instances=cap))
            self.assertEqual(slots, [r['address'] for r in out
                                     if nvidia_vf.is_vgpu_slot(r)], cap)

    def test_exposed_type_follows_the_mdev_rules(self):
        states = {v: free(v, Q4, Q24) for v in VFS}
        # First enabled type the GPU supports; a custom class.
        conf = settings_mod.Settings(
            enabled_mdev_types=('nvidia-35', 'nvidia-1155'),
            mdev_types={
                'nvidia-35': conf_mdev.MdevTypeOptions('nvidia-35'),
                'nvidia-1155': conf_mdev.MdevTypeOptions(
                    'nvidia-1155', mdev_class='L40S',
                    resource_class='CUSTOM_L40S')})
        out = self.by_address(nvidia_vf.apply(gpu_records(), states, conf))
        self.assertEqual('nvidia-1155', out[PF]['mdev_type'])
        self.assertEqual('CUSTOM_L40S', out[PF]['extra_info'][
            'resource_class'])

    def test_no_enabled_type_leaves_plain_pci_records_annotated(self):
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1155)}
        states.update({v: free(v, Q24) for v in VFS[1:]})
        records = gpu_records()
        out = nvidia_vf.apply(records, states, settings('nvidia-35'))
        for before, after in zip(records, out):
            self.assertEqual(
                {k: v for k, v in before.items() if k != 'extra_info'},
                {k: v for k, v in after.items() if k != 'extra_info'})
            self.assertEqual('nvidia-vfio',
                             after['extra_info']['vgpu_framework'])
            self.assertNotIn('mdev_exposed', after['extra_info'])
        self.assertEqual('nvidia-1155',
                         out[1]['extra_info']['vgpu_current'])
        self.assertEqual({}, records[1]['extra_info'])   # not modified

    def test_other_records_and_order_are_kept(self):
        nic = dict(record('0000:af:00.0', 'type-PF'), vendor_id='8086')
        nic_vf = dict(record('0000:af:02.0', parent='0000:af:00.0'),
                      vendor_id='8086')
        records = [nic] + gpu_records() + [nic_vf]
        out = nvidia_vf.apply(records, {v: free(v, Q4) for v in VFS},
                              settings('nvidia-1150'))
        self.assertEqual([r['address'] for r in records],
                         [r['address'] for r in out])
        self.assertIs(nic, out[0])
        self.assertIs(nic_vf, out[-1])
        self.assertEqual(VFS, nvidia_vf.candidate_addresses(records))

    def test_no_states_changes_nothing(self):
        records = gpu_records()
        self.assertEqual(records, nvidia_vf.apply(records, {},
                                                  settings('nvidia-1150')))

    def test_a_type_of_another_naming_is_not_exposed_on_a_vgpu_gpu(self):
        conf = settings('mtty-1', device_addresses=(PF,))
        out = self.by_address(nvidia_vf.apply(
            gpu_records(), {v: free(v, Q4) for v in VFS}, conf))
        self.assertIsNone(out[PF]['mdev_type'])
        self.assertEqual(set(), {a for a, r in out.items()
                                 if nvidia_vf.is_vgpu_slot(r)})


class TestCheck(testtools.TestCase):
    """What check-config says about such a GPU."""

    def notes(self, states, conf):
        from nova_pci_mdev.virt.libvirt.nvidia import check as nvidia_check
        records = nvidia_vf.apply(gpu_records(), states, conf)
        return [(n.severity, str(n)) for n in nvidia_check.gpu_notes(
            records, states, conf)]

    def test_exposed_type_counts_and_offers(self):
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1150)}
        states.update({v: free(v, Q4) for v in VFS[1:]})
        ((severity, text),) = self.notes(states, settings('nvidia-1150'))
        self.assertEqual('note', severity)
        self.assertIn('exposes nvidia-1150 -> VGPU: 4 slot(s) (1 VF(s) hold '
                      'it, 3 free VF(s) can take it now; sysfs does not say '
                      'how many fit at once: set [mdev_nvidia-1150] '
                      'max_instances', text)
        self.assertIn('offer now: nvidia-1150 (NVIDIA L40S-4Q);', text)

    def test_a_type_the_gpu_cannot_serve_now_is_a_warning(self):
        states = {VFS[0]: nvidia_vf.VfState(VFS[0], 1155)}
        states.update({v: free(v, Q24) for v in VFS[1:]})
        notes = self.notes(states, settings('nvidia-1150',
                                            device_addresses=(PF,)))
        self.assertEqual(['note', 'warning'], [s for s, _t in notes])
        self.assertIn('cannot serve it now: no VF holds it and no free VF '
                      'can take it (VFs hold nvidia-1155)', notes[1][1])

    def test_no_enabled_type(self):
        ((severity, text),) = self.notes({v: free(v, Q4) for v in VFS},
                                         settings('nvidia-35'))
        self.assertEqual('note', severity)
        self.assertIn('exposes no enabled type', text)
