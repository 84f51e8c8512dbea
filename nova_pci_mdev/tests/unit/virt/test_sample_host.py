"""The bundled sample host, read by the real libvirt test driver, its
sidecar and its nova.conf (every alias must be servable on the host).

::

    node 0: GPU 0000:3b:00.0 (nvidia-223 via config), mlx5 0000:5e:00.0,
            NVMe 0000:1d:00.0 (not whitelisted)
    node 1: GPU 0000:d8:00.0 (nvidia-222, 2 mdevs), PF 0000:af:00.0 + 4 VFs
    none:   mtty (sidecar: libvirt 9 cannot hold it in a host file)
"""

import fnmatch
import json
import os
import shutil
import subprocess
from xml.etree import ElementTree

import fixtures
import testtools

from nova_pci_mdev import data
from nova_pci_mdev import numa

try:
    import libvirt
except ImportError:  # pragma: no cover
    libvirt = None

GPU0, GPU1 = 'pci_0000_3b_00_0', 'pci_0000_d8_00_0'
MLX5, PF, NVME = 'pci_0000_5e_00_0', 'pci_0000_af_00_0', 'pci_0000_1d_00_0'
VFS = ['pci_0000_af_02_%d' % f for f in range(4)]
MDEVS = {'mdev_c4a0c2a6_3b4f_4d5e_9a43_2b8b5c7e0d11_0000_d8_00_0',
         'mdev_0e5d8d53_6f3a_4b8e_8c3b_7f1a2d9e4c22_0000_d8_00_0'}
NODEDEV_RNG = '/usr/share/libvirt/schemas/nodedev.rng'


def _sidecar():
    with open(data.SAMPLE_HOST_TOPOLOGY) as f:
        return json.load(f)


def _host_root():
    return ElementTree.parse(data.SAMPLE_HOST_XML).getroot()


def _pci(el):
    """(address, vendor, product, numa node, {type: available}) of one
    ``<device>`` element, or None when it is not a PCI function."""
    pci = el.find("capability[@type='pci']")
    if pci is None:
        return None
    parts = [int(pci.findtext(p))
             for p in ('domain', 'bus', 'slot', 'function')]
    numa_el = pci.find('numa')
    return ('%04x:%02x:%02x.%x' % tuple(parts),
            pci.find('vendor').get('id')[2:],
            pci.find('product').get('id')[2:],
            None if numa_el is None else int(numa_el.get('node')),
            {t.get('id'): int(t.findtext('availableInstances'))
             for t in pci.findall("capability[@type='mdev_types']/type")})


class RealTestDriverTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if libvirt is None:
            self.skipTest('libvirt-python is not installed')
        libvirt.registerErrorHandler(lambda *a: None, None)
        self.conn = libvirt.open(data.sample_connection_uri())
        self.addCleanup(self.conn.close)

    def test_list_all_devices_per_flag(self):
        cases = [
            (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV,
             {GPU0, GPU1, MLX5, PF, NVME, *VFS}),
            (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES,
             {GPU0, GPU1, MLX5}),
            (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV, MDEVS),
            (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SYSTEM, {'computer'}),
            (0, {'computer', GPU0, GPU1, MLX5, PF, NVME, *VFS, *MDEVS}),
        ]
        for flags, expected in cases:
            self.assertEqual(expected, {
                d.name() for d in self.conn.listAllDevices(flags)}, flags)

    def test_devices_as_libvirt_reports_them(self):
        cases = {
            GPU0: ('0000:3b:00.0', '10de', '1eb8', 0,
                   {'nvidia-222': 16, 'nvidia-223': 8, 'nvidia-224': 4}),
            GPU1: ('0000:d8:00.0', '10de', '1eb8', 1,
                   {'nvidia-222': 14, 'nvidia-223': 0, 'nvidia-224': 0}),
            MLX5: ('0000:5e:00.0', '15b3', '101d', 0, {'mlx5_core-local': 16}),
            PF: ('0000:af:00.0', '8086', '1572', 1, {}),
            VFS[2]: ('0000:af:02.2', '8086', '154c', 1, {}),
            NVME: ('0000:1d:00.0', '144d', 'a808', 0, {}),
        }
        for name, expected in cases.items():
            el = ElementTree.fromstring(
                self.conn.nodeDeviceLookupByName(name).XMLDesc(0))
            self.assertEqual(expected, _pci(el), name)
        pf = ElementTree.fromstring(
            self.conn.nodeDeviceLookupByName(PF).XMLDesc(0))
        self.assertEqual(['0x0', '0x1', '0x2', '0x3'], [
            a.get('function') for a in pf.iterfind(
                "capability/capability[@type='virt_functions']/address")])

    def test_existing_mdevs(self):
        for name in MDEVS:
            dev = self.conn.nodeDeviceLookupByName(name)
            el = ElementTree.fromstring(dev.XMLDesc(0))
            self.assertEqual(
                (GPU1, 'nvidia-222', name[5:41].replace('_', '-')),
                (dev.parent(), el.find('capability/type').get('id'),
                 el.findtext('capability/uuid')))

    def test_host_info_has_no_numa_cells(self):
        """Why the sidecar exists: cpus and memory come through, cells do
        not."""
        model, memory_mib, cpus = self.conn.getInfo()[:3]
        caps = ElementTree.fromstring(self.conn.getCapabilities())
        self.assertEqual('0', caps.find('host/topology/cells').get('num'))
        cells = _sidecar()['cells']
        self.assertEqual(cpus, sum(len(c['cpus']) for c in cells))
        self.assertEqual(memory_mib * 1024,
                         sum(c['memory_kb'] for c in cells))

    def test_top_level_mdev_types_in_a_host_file(self):
        """Pins what this libvirt does with the sidecar's virtual parent:
        refused at open ('unknown capability type', libvirt <= 9), or,
        on a libvirt that knows virtual parents, listed as mdev-capable."""
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'host.xml')
        with open(data.SAMPLE_HOST_XML) as f:
            text = f.read()
        extra = ''.join(_sidecar()['extra_node_devices'])
        with open(path, 'w') as f:
            f.write(text.replace('</node>', extra + '</node>'))
        try:
            conn = libvirt.open('test://' + path)
        except libvirt.libvirtError as exc:
            self.assertIn('unknown capability type', str(exc))
            return
        self.addCleanup(conn.close)
        self.assertIn('mtty', {d.name() for d in conn.listAllDevices(
            libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES)})


class SampleFilesTest(testtools.TestCase):

    def test_package_data_paths(self):
        for path in (data.SAMPLE_HOST_XML, data.SAMPLE_HOST_TOPOLOGY,
                     data.SAMPLE_NOVA_CONF):
            self.assertTrue(os.path.isfile(path), path)
        self.assertEqual('test:///', data.sample_connection_uri()[:8])

    def test_sidecar_cells_build_a_topology(self):
        doc = _sidecar()
        topo = numa.HostTopology(tuple(
            numa.HostCell(id=c['id'], socket=c['socket'],
                          cpus=frozenset(c['cpus']),
                          memory_kb=c['memory_kb']) for c in doc['cells']))
        self.assertEqual(((0, 1), 0, 1), (topo.ids, topo.socket_of(0),
                                          topo.socket_of(1)))
        self.assertFalse(topo.cell(0).cpus & topo.cell(1).cpus)
        self.assertEqual('sample-compute', doc['hostname'])
        nodes = {_pci(d)[3] for d in _host_root().iter('device') if _pci(d)}
        self.assertEqual({0, 1}, nodes)

    def test_sidecar_virtual_parent(self):
        (xml,) = _sidecar()['extra_node_devices']
        el = ElementTree.fromstring(xml)
        types = el.findall("capability[@type='mdev_types']"
                           "/capability[@type='mdev_types']/type")
        self.assertEqual(('mtty', [('mtty-1', '24'), ('mtty-2', '12')]), (
            el.findtext('name'),
            [(t.get('id'), t.findtext('availableInstances'))
             for t in types]))

    def test_host_devices_validate_against_libvirts_schema(self):
        if not (shutil.which('xmllint') and os.path.exists(NODEDEV_RNG)):
            self.skipTest('xmllint or libvirt schemas not installed')
        tmp = self.useFixture(fixtures.TempDir()).path
        for i, dev in enumerate(_host_root().iter('device')):
            path = os.path.join(tmp, '%d.xml' % i)
            ElementTree.ElementTree(dev).write(path)
            proc = subprocess.run(
                ['xmllint', '--noout', '--relaxng', NODEDEV_RNG, path],
                capture_output=True, text=True)
            self.assertEqual(0, proc.returncode, proc.stderr)


class SampleNovaConfTest(testtools.TestCase):
    """The bundled nova.conf loads cleanly and fits the bundled host."""

    def setUp(self):
        super().setUp()
        from nova_pci_mdev import conf
        self.settings = conf.load_settings(
            conf.new_config(config_files=[data.SAMPLE_NOVA_CONF]))

    def _records(self):
        """Parents, slot templates and PCI functions of the sample host,
        as device-record dicts (one slot per parent is enough here)."""
        devices = list(_host_root().iter('device'))
        virtual = ElementTree.fromstring(_sidecar()['extra_node_devices'][0])
        parents = [(p[0], p[1], p[2], p[3], p[4])
                   for p in map(_pci, devices) if p and p[4]]
        parents.append(('mtty', '', '', None, {
            t.get('id'): int(t.findtext('availableInstances'))
            for t in virtual.iter('type')}))
        records = []
        for address, vendor, product, node, types in parents:
            exposed = self.settings.exposed_type(address, list(types))
            mdev_type = exposed.mdev_type if exposed else None
            base = dict(vendor_id=vendor, product_id=product, numa_node=node,
                        mdev_type=mdev_type)
            records.append(dict(base, address=address, dev_type='mdev-pf',
                                parent_addr=None))
            if mdev_type and types[mdev_type] > 0:
                records.append(dict(base, dev_type='mdev-vf',
                                    parent_addr=address,
                                    address='slot-of-' + address))
        for el in devices:
            pci = _pci(el)
            if pci and not pci[4]:
                is_vf = el.find("capability/capability[@type="
                                "'phys_function']") is not None
                is_pf = el.find("capability/capability[@type="
                                "'virt_functions']") is not None
                records.append(dict(
                    address=pci[0], vendor_id=pci[1], product_id=pci[2],
                    numa_node=pci[3], mdev_type=None, parent_addr=None,
                    dev_type='type-VF' if is_vf else
                    'type-PF' if is_pf else 'type-PCI'))
        return records

    def test_every_alias_can_be_served(self):
        from nova_pci_mdev.pci import pools
        from nova_pci_mdev.pci import request
        whitelisted = [r for r in self._records()
                       if self.settings.whitelist.match(r)]

        def serves(spec, r):
            # Parent pools serve only a spec that names their dev_type.
            return all(r.get(k) == v for k, v in spec.items()) and (
                r['dev_type'] not in pools.EXPLICIT_DEV_TYPES
                or spec.get('dev_type') == r['dev_type'])

        names = self.settings.aliases.names()
        self.assertEqual({'vGPU', 'nvidia-223', 'mlx5', 'mtty', 'gpu-whole',
                          'nic-vf'}, set(names))
        served = {}
        for name in names:
            (req,) = request.requests_from_extra_specs(
                {'pci_passthrough:alias': '%s:1' % name},
                self.settings.aliases)
            served[name] = sorted(
                r['parent_addr'] or r['address'] for r in whitelisted
                if any(serves(spec, r) for spec in req.spec))
        self.assertEqual({
            'vGPU': ['0000:d8:00.0'], 'nvidia-223': ['0000:3b:00.0'],
            'mlx5': ['0000:5e:00.0'], 'mtty': ['mtty'],
            'gpu-whole': ['0000:3b:00.0', '0000:d8:00.0'],
            'nic-vf': ['0000:af:02.%d' % f for f in range(4)]}, served)

    def test_every_enabled_type_has_a_parent_and_addresses_exist(self):
        records = self._records()
        exposed = {r['mdev_type'] for r in records
                   if r['dev_type'] == 'mdev-pf'}
        self.assertEqual(set(self.settings.enabled_mdev_types),
                         exposed - {None})
        addresses = {r['address'] for r in records}
        for opts in self.settings.mdev_types.values():
            for address in opts.device_addresses:
                self.assertIn(address, addresses)
        classes = {t: o.resource_class
                   for t, o in self.settings.mdev_types.items()}
        self.assertEqual({'nvidia-222': 'VGPU', 'nvidia-223': 'VGPU',
                          'mlx5_core-local': 'CUSTOM_MLX5',
                          'mtty-1': 'CUSTOM_MTTY'}, classes)

    def test_nvme_is_left_out_on_purpose(self):
        nvme = [r for r in self._records() if r['vendor_id'] == '144d']
        self.assertEqual([None], [self.settings.whitelist.match(r)
                                  for r in nvme])
        self.assertFalse(any(fnmatch.fnmatch('nvidia-224', t)
                             for t in self.settings.enabled_mdev_types))
