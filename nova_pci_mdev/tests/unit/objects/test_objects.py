"""Object hashes are pinned: a field change without a version bump fails.

When this test fails after a deliberate change, bump the object's VERSION,
add a ``# Version X.Y`` line and an ``obj_make_compatible`` rule, then
update the hash here.
"""

from oslo_versionedobjects import fixture
import testtools

from nova_pci_mdev import objects
from nova_pci_mdev.objects import base

objects.register_all()

OBJECT_DATA = {
    'InstancePCIRequest': '1.5-eea69c4e56fc7d6344c2f0e3f12eee0b',
    'InstancePCIRequests': '1.2-3928680ff73c1b9e8a1d15042f6c8287',
    'PciDevice': '1.8-253374057ddca443324e21999b78b307',
    'PciDeviceList': '1.4-6db9cd1c553653ec7c1465633b04d789',
    'PciDevicePool': '1.2-6623bd601348194e42f2bb48e2f9a5a9',
    'PciDevicePoolList': '1.2-77f24e35badee9b285087c148f186685',
}


class TestObjectVersions(testtools.TestCase):

    def test_versions(self):
        checker = fixture.ObjectVersionChecker(
            base.NovaPciMdevObjectRegistry.obj_classes())
        expected, actual = checker.test_hashes(OBJECT_DATA)
        self.assertEqual(expected, actual,
                         'Object fields changed without a version bump')

    def test_registry_is_ours(self):
        for name in OBJECT_DATA:
            cls = getattr(objects, name)
            self.assertEqual('nova_pci_mdev', cls.OBJ_PROJECT_NAMESPACE)
