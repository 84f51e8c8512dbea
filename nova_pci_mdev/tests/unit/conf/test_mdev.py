"""mdev classes, resource classes and the [mdev_<type>] groups."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_pci_mdev import exception
from nova_pci_mdev.conf import mdev
from nova_pci_mdev.tests.unit.conf import base


class ResourceClassTest(base.ConfTestCase):

    GOOD = [
        ('VGPU', 'VGPU'),
        ('vgpu', 'VGPU'),
        ('mlx5', 'CUSTOM_MLX5'),
        ('Mlx5_Sf', 'CUSTOM_MLX5_SF'),
        ('CUSTOM_FOO', 'CUSTOM_FOO'),
        ('custom_foo', 'CUSTOM_FOO'),
        ('PGPU', 'CUSTOM_PGPU'),
        ('_', 'CUSTOM__'),
        ('a' * 248, 'CUSTOM_' + 'A' * 248),
    ]
    BAD = ['', 'a' * 249, 'mlx-5', 'mlx5 ', 'a/b', '../x', 'CUSTOM_',
           'custom_', 'é', 'mlx5\n', None, 5]

    def test_good(self):
        for value, expected in self.GOOD:
            self.assertEqual(expected, mdev.resource_class_for(value))
            self.assertLessEqual(len(expected), 255)

    def test_bad(self):
        for value in self.BAD:
            exc = self.assertRaises(exception.InvalidValue,
                                    mdev.resource_class_for, value)
            self.assertIn('mdev_class', str(exc))
            self.assertIn(repr(value), str(exc))

    @settings(max_examples=200, deadline=None, database=None)
    @given(st.text(max_size=20))
    def test_arbitrary_text(self, text):
        try:
            rc = mdev.resource_class_for(text)
        except exception.InvalidValue:
            return
        self.assertRegex(rc, r'^(VGPU|CUSTOM_[A-Z0-9_]+)$')

    def test_severity(self):
        err = exception.ConfigError(group='g', option='o', value='v',
                                    rule='r')
        warn = exception.ConfigWarning(group='g', option='o', value='v',
                                       rule='r')
        self.assertEqual(('error', 'warning'), (err.severity, warn.severity))
        self.assertEqual('[g] o = v: r', str(err))
        self.assertEqual('[g] o = v: r (warning)', str(warn))


class ReadMdevTypesTest(base.ConfTestCase):

    def test_defaults(self):
        s = self.load('[devices]\nenabled_mdev_types = nvidia-35\n')
        problems = []
        types = mdev.read_mdev_types(s, ['nvidia-35'], problems)
        self.assertEqual([], problems)
        self.assertEqual(
            {'nvidia-35': mdev.MdevTypeOptions(
                mdev_type='nvidia-35', device_addresses=(),
                mdev_class='VGPU', resource_class='VGPU',
                max_instances=None)}, types)

    def test_values_are_normalised(self):
        c = self.load("""
            [devices]
            enabled_mdev_types = mtty-1, i915-GVTg_V5_4
            [mdev_mtty-1]
            device_addresses = mtty, 0000:0A:00.0
            mdev_class = custom_tty
            max_instances = 3
            [mdev_i915-GVTg_V5_4]
            """)
        problems = []
        types = mdev.read_mdev_types(c, ['mtty-1', 'i915-GVTg_V5_4'],
                                     problems)
        self.assertEqual([], problems)
        self.assertEqual(['mtty-1', 'i915-GVTg_V5_4'], list(types))
        tty = types['mtty-1']
        self.assertEqual(('mtty', '0000:0a:00.0'), tty.device_addresses)
        self.assertEqual('custom_tty', tty.mdev_class)
        self.assertEqual('CUSTOM_TTY', tty.resource_class)
        self.assertEqual(3, tty.max_instances)

    def test_bad_values(self):
        cases = [
            # (group body, option, words in the message)
            ('device_addresses = 0000:84:00.0/../x', 'device_addresses',
             'expected a PCI address'),
            ('device_addresses = ../../etc', 'device_addresses',
             'expected a PCI address'),
            ('device_addresses = a b', 'device_addresses',
             'expected a PCI address'),
            ('mdev_class = mlx-5', 'mdev_class', 'letters, digits'),
            ('mdev_class = %s' % ('x' * 249), 'mdev_class', 'at most 248'),
            ('mdev_class = CUSTOM_', 'mdev_class', 'followed by a name'),
            ('max_instances = 0', 'max_instances', 'positive integer'),
            ('max_instances = -3', 'max_instances', 'positive integer'),
            ('max_instances = many', 'max_instances', "'many'"),
            ('max_instances = 1.5', 'max_instances', "'1.5'"),
        ]
        for body, option, words in cases:
            c = self.load('[devices]\nenabled_mdev_types = t1\n'
                          '[mdev_t1]\n%s\n' % body)
            problems = []
            types = mdev.read_mdev_types(c, ['t1'], problems)
            self.assertEqual({}, types, body)
            self.assertEqual(1, len(problems), (body, problems))
            problem = problems[0]
            self.assertEqual('mdev_t1', problem.kwargs['group'])
            self.assertEqual(option, problem.kwargs['option'])
            self.assertIn(words, str(problem), body)

    def test_address_in_two_groups(self):
        c = self.load("""
            [devices]
            enabled_mdev_types = t1, t2, t3
            [mdev_t1]
            device_addresses = 0000:84:00.0, 0000:85:00.0
            [mdev_t2]
            device_addresses = 0000:86:00.0, 0000:84:00.0
            [mdev_t3]
            device_addresses = 0000:85:00.0
            """)
        problems = []
        mdev.read_mdev_types(c, ['t1', 't2', 't3'], problems)
        self.assertEqual(
            ["[mdev_t2] device_addresses = '0000:84:00.0': already listed "
             "in [mdev_t1] device_addresses; a parent exposes one type",
             "[mdev_t3] device_addresses = '0000:85:00.0': already listed "
             "in [mdev_t1] device_addresses; a parent exposes one type"],
            [str(p) for p in problems])

    def test_address_twice_in_one_group_is_a_warning(self):
        c = self.load('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\n'
                      'device_addresses = 0000:84:00.0,0000:84:00.0\n')
        problems = []
        types = mdev.read_mdev_types(c, ['t1'], problems)
        self.assertEqual(['warning'], [p.severity for p in problems])
        self.assertEqual(('0000:84:00.0',), types['t1'].device_addresses)
