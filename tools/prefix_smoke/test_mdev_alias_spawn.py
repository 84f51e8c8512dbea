# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Prefix smoke: what the PCI tracker is told about mdevs, a guest gets.

Not part of the patch series. tools/check-patches copies this file into
the Nova tree at every prefix of the series whose libvirt driver reports
mediated devices to the PCI tracker, and runs it there, so that a prefix
cannot report a device its own driver cannot attach (Nova reviewers want
every prefix bisectable). It only uses what Nova 34.0.0 has (the
functional libvirt base class, the fake libvirt of
nova/tests/fixtures/libvirt.py) and works with the fake libvirt before
and after the series reworks it.

The host::

    compute 'unchanged'        compute 'opted-in'
    GPU 0000:81:00.0           GPU 0000:81:00.0, NUMA node 0
      mdev M0 (nvidia-11)        mdev M1 (nvidia-11), existing
                                 device_spec max_instances = 2

'unchanged' starts with the nova.conf of a 34.0.0 vGPU deployment (a
device_spec naming the GPU, no mdev_type): its GPU stays a whole type-PCI
device and keeps its VGPU inventory. Then the device_spec names the mdev
type and 'opted-in' starts: its GPU is an mdev-pf parent and the tracker
gets one mdev-vf per mdev the driver can attach: M1 only, where the driver
cannot create mdevs; M1 and one slot (max_instances caps the parent at two)
where it creates them before the guest is defined. The parent itself can
be claimed too: a server with pci_passthrough:alias=gpu:1 (device_type
mdev-pf) must get it as a PCI hostdev (it is deleted again). Then one
server per reported mdev boots with pci_passthrough:alias=vgpu:1; each
must be ACTIVE on 'opted-in' with exactly the mdev the tracker allocated to
it in its domain XML, that mdev must exist on the host with its type and
parent, and Placement must hold no VGPU for it.
"""

from lxml import etree
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

import nova.conf
from nova import context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import utils as libvirt_utils

CONF = nova.conf.CONF

MDEV_TYPE = fakelibvirt.NVIDIA_11_VGPU_TYPE
GPU_NAME = fakelibvirt.MDEVCAP_DEV1_PCI_ADDR     # pci_0000_81_00_0
GPU_ADDRESS = '0000:81:00.0'
VENDOR_ID = fakelibvirt.MDEV_CAPABLE_VEND_ID.lower()
PRODUCT_ID = fakelibvirt.MDEV_CAPABLE_PROD_ID.lower()
ALIAS = 'vgpu'
GPU_ALIAS = 'gpu'
# What a slot-creating driver reports for the GPU: the existing mdev and
# one it can still create.
MAX_INSTANCES = 2


def mdev_name(mdev_uuid):
    return libvirt_utils.mdev_uuid2name(mdev_uuid)


class _CreatedMdev(fakelibvirt.FakeMdevDevice):
    """An mdev made by nodeDeviceCreateXML where the fake did not make it."""

    def name(self):
        return self.dev_name

    def setAutostart(self, autostart):
        return 0


class MdevCreatingConnection(fakelibvirt.Connection):
    """The fake connection, creating the mdevs the driver asks for.

    Nova 34.0.0's fake libvirt ignores nodeDeviceCreateXML() and
    nodeDeviceDefineXML() (its vGPU tests mock the driver's _create_mdev);
    the series' fake libvirt rework creates the mdev on its parent. This
    fills in only when the fixture did not create it, so the driver's own
    mdev creation runs against either fake.
    """

    def nodeDeviceCreateXML(self, xml, flags):
        created = super().nodeDeviceCreateXML(xml, flags)
        if created is not None:
            return created
        device = etree.fromstring(xml)
        cap = device.find("./capability[@type='mdev']")
        name = mdev_name(cap.find('./uuid').text)
        mdev = _CreatedMdev(
            dev_name=name, type_id=cap.find('./type').get('id'),
            parent=device.find('./parent').text)
        # the attributes the reworked fake's mdevs have
        mdev.dev_name, mdev.parent_name = name, device.find('./parent').text
        self.mdev_info.devices[name] = mdev
        return mdev

    def nodeDeviceDefineXML(self, xml, flags):
        defined = super().nodeDeviceDefineXML(xml, flags)
        if defined is not None:
            return defined
        cap = etree.fromstring(xml).find("./capability[@type='mdev']")
        return self.mdev_info.devices.get(
            mdev_name(cap.find('./uuid').text))


class MdevAliasSpawnSmokeTest(base.ServersTestBase):

    ADMIN_API = True
    microversion = 'latest'
    ADDITIONAL_FILTERS = ['PciPassthroughFilter']

    # A driver that creates a claimed mdev before the guest is defined may
    # report the mdevs a parent can still create (slots); one that cannot
    # must report existing mdevs only. This is the one per-prefix branch.
    CREATES_MDEVS = hasattr(libvirt_driver.LibvirtDriver,
                            '_prepare_pci_mdevs')

    def setUp(self):
        self.ctxt = context.get_admin_context()
        self.flags(enabled_mdev_types=[MDEV_TYPE], group='devices')
        nova.conf.devices.register_dynamic_opts(CONF)
        self.flags(
            device_spec=[jsonutils.dumps({'vendor_id': VENDOR_ID})],
            alias=[jsonutils.dumps(alias) for alias in (
                {'vendor_id': VENDOR_ID, 'mdev_type': MDEV_TYPE,
                 'name': ALIAS},
                {'vendor_id': VENDOR_ID, 'product_id': PRODUCT_ID,
                 'device_type': 'mdev-pf', 'name': GPU_ALIAS})],
            group='pci')
        super().setUp()

    def _get_connection(self, host_info=None, pci_info=None, mdev_info=None,
                        vdpa_info=None, libvirt_version=None,
                        qemu_version=None, hostname=None):
        # base.ServersTestBase._get_connection() with our connection class
        return MdevCreatingConnection(
            'qemu:///system',
            version=libvirt_version or fakelibvirt.FAKE_LIBVIRT_VERSION,
            hv_version=qemu_version or fakelibvirt.FAKE_QEMU_VERSION,
            host_info=host_info or fakelibvirt.HostInfo(
                cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2),
            pci_info=pci_info, mdev_info=mdev_info, vdpa_info=vdpa_info,
            hostname=hostname)

    def _start_gpu_host(self, hostname, existing_mdev):
        mdevs = fakelibvirt.HostMdevDevicesInfo(devices={
            mdev_name(existing_mdev): fakelibvirt.FakeMdevDevice(
                dev_name=mdev_name(existing_mdev), type_id=MDEV_TYPE,
                parent=GPU_NAME)})
        self.start_compute(
            hostname=hostname, mdev_info=mdevs,
            pci_info=fakelibvirt.HostPCIDevicesInfo(
                num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=1))
        return self.computes[hostname].driver._host.get_connection()

    def _tracked(self, hostname):
        node = objects.ComputeNode.get_by_nodename(self.ctxt, hostname)
        return objects.PciDeviceList.get_by_compute_node(self.ctxt, node.id)

    def _vgpu_totals(self, hostname):
        """VGPU inventory totals by provider name in the host's tree."""
        return {
            rp['name']: self._get_provider_inventory(rp['uuid'])['VGPU'][
                'total']
            for rp in self._get_all_rps_in_a_tree(
                self.compute_rp_uuids[hostname])
            if 'VGPU' in self._get_provider_inventory(rp['uuid'])}

    def _host_mdevs(self, conn):
        """{mdev uuid: (type, parent)} of the mdevs on a fake host."""
        found = {}
        for name in conn.listDevices('mdev', 0):
            device = etree.fromstring(
                conn.nodeDeviceLookupByName(name).XMLDesc(0))
            found[libvirt_utils.mdev_name2uuid(name)] = (
                device.find("./capability[@type='mdev']/type").get('id'),
                device.find('./parent').text)
        return found

    def _hostdevs(self, conn, server, hostdev_type):
        """The source addresses of the guest's hostdevs of a type."""
        xml = etree.fromstring(
            conn.lookupByUUIDString(server['id']).XMLDesc(0))
        return [
            hostdev.find('./source/address')
            for hostdev in xml.findall(
                "./devices/hostdev[@mode='subsystem'][@type='%s']"
                % hostdev_type)]

    def _guest_mdevs(self, conn, server):
        return [address.get('uuid')
                for address in self._hostdevs(conn, server, 'mdev')]

    def _assert_no_vgpu_allocation(self, server):
        for alloc in self._get_allocations_by_server_uuid(
                server['id']).values():
            self.assertNotIn('VGPU', alloc['resources'])

    def _assert_unchanged_config_keeps_the_gpu_whole(self):
        self._start_gpu_host('unchanged', uuids.mdev_unchanged)
        self.assertEqual(
            [(GPU_ADDRESS, 'type-PCI', None)],
            [(dev.address, dev.dev_type, dev.mdev_type)
             for dev in self._tracked('unchanged')])
        totals = self._vgpu_totals('unchanged')
        self.assertEqual(['unchanged_' + GPU_NAME], list(totals))
        self.assertGreater(totals['unchanged_' + GPU_NAME], 0)

    def _assert_reports_what_it_can_attach(self, hostname, existing):
        tracked = self._tracked(hostname)
        parents = [dev for dev in tracked if dev.dev_type == 'mdev-pf']
        self.assertEqual([(GPU_ADDRESS, MDEV_TYPE)],
                         [(dev.address, dev.mdev_type) for dev in parents])
        mdevs = [dev for dev in tracked if dev.dev_type == 'mdev-vf']
        self.assertEqual(
            {(GPU_ADDRESS, MDEV_TYPE)},
            {(dev.parent_addr, dev.mdev_type) for dev in mdevs})
        self.assertEqual(len(parents) + len(mdevs), len(tracked))
        reported = {dev.address for dev in mdevs}
        self.assertIn(existing, reported)
        if self.CREATES_MDEVS:
            self.assertEqual(MAX_INSTANCES, len(reported), reported)
        else:
            self.assertEqual({existing}, reported,
                             'the tracker got mdevs that do not exist on a '
                             'host whose driver cannot create mdevs')
        # Placement is offered none of the parent's mdevs
        self.assertEqual({}, {
            name: total for name, total in self._vgpu_totals(
                hostname).items() if total > 0})
        return reported

    def _assert_attached(self, conn, server):
        """The one mdev the tracker gave server, in its XML; returns it."""
        self.assertEqual('opted-in', server['OS-EXT-SRV-ATTR:host'])
        given = objects.PciDeviceList.get_by_instance_uuid(
            self.ctxt, server['id'])
        self.assertEqual(
            [('mdev-vf', MDEV_TYPE, GPU_ADDRESS, 'allocated')],
            [(dev.dev_type, dev.mdev_type, dev.parent_addr, dev.status)
             for dev in given])
        instance = objects.Instance.get_by_uuid(
            self.ctxt, server['id'], expected_attrs=['pci_devices'])
        self.assertEqual([given[0].address],
                         [dev.address for dev in instance.pci_devices])
        self.assertEqual([given[0].address], self._guest_mdevs(conn, server))
        self.assertEqual((MDEV_TYPE, GPU_NAME),
                         self._host_mdevs(conn).get(given[0].address))
        self._assert_no_vgpu_allocation(server)
        return given[0].address

    def _assert_gpu_attached_whole(self, conn, flavor_id):
        """The tracker reports the parent too: a server gets it whole."""
        server = self._create_server(flavor_id=flavor_id, networks='none')
        self.assertEqual('opted-in', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(
            [('mdev-pf', GPU_ADDRESS, 'allocated')],
            [(dev.dev_type, dev.address, dev.status) for dev in
             objects.PciDeviceList.get_by_instance_uuid(
                 self.ctxt, server['id'])])
        self.assertEqual(
            [(0, 0x81, 0, 0)],
            [tuple(int(address.get(key), 16)
                   for key in ('domain', 'bus', 'slot', 'function'))
             for address in self._hostdevs(conn, server, 'pci')])
        self.assertEqual([], self._guest_mdevs(conn, server))
        self._assert_no_vgpu_allocation(server)
        self._delete_server(server)

    def test_every_reported_mdev_is_attached(self):
        self._assert_unchanged_config_keeps_the_gpu_whole()

        # the opt-in; the device spec's max_instances (the per parent
        # limit of the PCI path) keeps the number of servers small
        self.flags(device_spec=[jsonutils.dumps(
            {'vendor_id': VENDOR_ID, 'mdev_type': MDEV_TYPE,
             'max_instances': MAX_INSTANCES})], group='pci')
        conn = self._start_gpu_host('opted-in', uuids.mdev_existing)
        reported = self._assert_reports_what_it_can_attach(
            'opted-in', uuids.mdev_existing)
        # any other reported mdev is a slot: it does not exist yet
        self.assertEqual({uuids.mdev_existing: (MDEV_TYPE, GPU_NAME)},
                         self._host_mdevs(conn))

        self._assert_gpu_attached_whole(conn, self._create_flavor(
            extra_spec={'pci_passthrough:alias': '%s:1' % GPU_ALIAS}))

        flavor_id = self._create_flavor(
            extra_spec={'pci_passthrough:alias': '%s:1' % ALIAS})
        attached = {
            self._assert_attached(conn, self._create_server(
                flavor_id=flavor_id, networks='none'))
            for _ in reported}
        self.assertEqual(reported, attached)
        # the existing mdev was used as it was, the others were created for
        # their servers with the UUID the tracker claimed
        self.assertEqual({uuid: (MDEV_TYPE, GPU_NAME) for uuid in reported},
                         self._host_mdevs(conn))
