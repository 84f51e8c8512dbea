"""What the patch series' libvirt driver does with a host's NVIDIA vGPU VFs.

Run by ``nova_pci_mdev/tests/functional/test_series_agreement.py`` with the
Python of a Nova virtualenv, inside a Nova tree that has the series applied
(0030 and later: ``nova.virt.libvirt.vgpu_vf``); never imported by this
project. It uses Nova's own unit test base class, so that Nova's fixtures
(fake libvirt connection, configuration) are set up as in Nova's tests.

Input: the JSON file named by ``SERIES_PROBE_INPUT``::

    {"host_xml": <libvirt test driver host XML: its PCI node devices>,
     "sysfs_devices": <a .../sys/bus/pci/devices directory of nvidia/ dirs>,
     "device_spec": [...], "enabled_mdev_types": [...],
     "claim": [<VF addresses an instance claimed>], "mdev_type": "nvidia-N",
     "output": <path of the JSON answer>}

Output: ``{"slots": {VF address: mdev_type}, "written": [addresses the
driver wrote the type to], "current": {VF address: type id}}``: the VFs
the series reports as vGPUs, then what ``_prepare_vgpu_vfs`` writes for
an instance holding the ``claim`` VFs.
"""

import json
import os

import fixtures
from lxml import etree
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

import nova.conf
from nova import objects
import nova.privsep
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt import fake
from nova.virt.libvirt import driver as libvirt_driver

CONF = nova.conf.CONF


class SeriesProbe(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())

    def test_probe(self):
        with open(os.environ['SERIES_PROBE_INPUT']) as f:
            probe = json.load(f)
        self.flags(enabled_mdev_types=probe['enabled_mdev_types'],
                   group='devices')
        self.flags(device_spec=[jsonutils.dumps(spec)
                                for spec in probe['device_spec']],
                   group='pci')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.vgpu_vf.SYSFS_PCI_DEVICES',
            probe['sysfs_devices']))
        self.useFixture(fixtures.MockPatchObject(
            nova.privsep.sys_admin_pctxt, 'client_mode', False))
        drvr = libvirt_driver.LibvirtDriver(fake.FakeVirtAPI(), False)
        root = etree.parse(probe['host_xml']).getroot()
        node_devs = [
            fakelibvirt.NodeDevice(
                drvr._get_connection(),
                xml=etree.tostring(dev, encoding='unicode'))
            for dev in root.iter('device')
            if dev.find("capability[@type='pci']") is not None]
        self.useFixture(fixtures.MockPatchObject(
            drvr._host, 'list_all_devices', return_value=node_devs))
        self.useFixture(fixtures.MockPatchObject(
            drvr, '_get_mediated_devices', return_value=[]))
        devs = jsonutils.loads(drvr._get_pci_passthrough_devices())
        slots = {dev['address']: dev['mdev_type'] for dev in devs
                 if dev['dev_type'] == 'type-VF' and dev.get('mdev_type')}

        instance = objects.Instance(
            uuid=uuids.instance, host=CONF.host,
            pci_devices=objects.PciDeviceList(objects=[
                objects.PciDevice(
                    address=address, dev_type='type-VF',
                    mdev_type=probe['mdev_type'], request_id=uuids.request)
                for address in probe['claim']]),
            pci_requests=objects.InstancePCIRequests(requests=[
                objects.InstancePCIRequest(
                    request_id=uuids.request, count=len(probe['claim']),
                    alias_name='vGPU',
                    spec=[{'mdev_type': probe['mdev_type']}])]))
        written = drvr._prepare_vgpu_vfs(instance)
        current = {}
        for address in sorted(os.listdir(probe['sysfs_devices'])):
            path = os.path.join(probe['sysfs_devices'], address, 'nvidia',
                                'current_vgpu_type')
            if os.path.exists(path):
                with open(path) as f:
                    current[address] = int(f.read().strip())
        with open(probe['output'], 'w') as f:
            json.dump({'slots': slots, 'written': written,
                       'current': current}, f)
