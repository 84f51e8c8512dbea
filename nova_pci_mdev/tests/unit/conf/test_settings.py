"""Settings: which type a parent exposes, resource classes."""

import dataclasses

import testtools

from nova_pci_mdev import conf
from nova_pci_mdev.conf import mdev


def opts(mdev_type, *addresses, mdev_class='VGPU'):
    return mdev.MdevTypeOptions(
        mdev_type=mdev_type, device_addresses=addresses,
        mdev_class=mdev_class,
        resource_class=mdev.resource_class_for(mdev_class))


class ExposedTypeTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        types = [opts('nvidia-35', '0000:84:00.0', '0000:85:00.0'),
                 opts('nvidia-36'),
                 opts('mtty-1', 'mtty', mdev_class='tty'),
                 opts('nvidia-37')]
        self.settings = conf.Settings(
            enabled_mdev_types=tuple(t.mdev_type for t in types),
            mdev_types={t.mdev_type: t for t in types})

    def test_table(self):
        cases = [
            # (parent, supported types, exposed type)
            ('0000:84:00.0', ['nvidia-35', 'nvidia-36'], 'nvidia-35'),
            ('0000:84:00.0', None, 'nvidia-35'),
            ('0000:84:00.0', ['nvidia-36'], 'nvidia-35'),   # mapping wins
            ('0000:85:00.0', ['nvidia-35'], 'nvidia-35'),
            ('0000:86:00.0', ['nvidia-35', 'nvidia-36'], 'nvidia-36'),
            ('0000:86:00.0', ['nvidia-37', 'nvidia-36'], 'nvidia-36'),
            ('0000:86:00.0', ['nvidia-37'], 'nvidia-37'),
            ('0000:86:00.0', ['nvidia-35'], None),
            ('0000:86:00.0', [], None),
            ('0000:86:00.0', None, 'nvidia-36'),
            ('mtty', ['mtty-1'], 'mtty-1'),
            ('MTTY', ['mtty-1'], None),   # virtual names are case-sensitive
            ('0000:84:00.0'.upper(), None, 'nvidia-35'),
        ]
        for parent, supported, expected in cases:
            got = self.settings.exposed_type(parent, supported)
            self.assertEqual(expected, got and got.mdev_type,
                             (parent, supported))

    def test_resource_class_of(self):
        self.assertEqual('VGPU',
                         self.settings.resource_class_of('nvidia-35'))
        self.assertEqual('CUSTOM_TTY',
                         self.settings.resource_class_of('mtty-1'))
        self.assertIsNone(self.settings.resource_class_of('nvidia-99'))

    def test_empty_settings(self):
        s = conf.Settings()
        self.assertIsNone(s.whitelist)
        self.assertIsNone(s.aliases)
        self.assertIsNone(s.exposed_type('0000:84:00.0', ['nvidia-35']))

    def test_frozen(self):
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          self.settings, 'enabled_mdev_types', ())
