"""pci.live_move: pinned destination requests, pairing, movability.

Real whitelist, alias table, trackers and pools; two hosts::

    source                                destination
    NUMA 0: GPU 0000:84:00.0 nvidia-35    NUMA 0: GPU 0000:84:00.0 nvidia-22
              S1 S2                                 D22a D22b
            PF 0000:82:00.0 (migratable)          PF 0000:82:00.0 (not migr.)
              VF 0000:82:02.0, .1                   VF 0000:82:02.0, .1
                                          NUMA 1: GPU 0000:85:00.0 nvidia-35
                                                    D35a D35b
                                                  PF 0000:83:00.0 (migratable)
                                                    VF 0000:83:02.0, .1

The ``vgpu`` alias ORs nvidia-22 and nvidia-35, so without pinning the
destination's pools would hand the guest an nvidia-22 slot (the first pool)
for its nvidia-35 vGPU.
"""

import json

import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import numa
from nova_pci_mdev import objects
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import live_move
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import request as pci_request
from nova_pci_mdev.pci import whitelist as whitelist_mod

objects.register_all()
T = fields.PciDeviceType

INST = 'aaaaaaaa-0000-4000-8000-000000000001'
MIG = 'cccccccc-0000-4000-8000-000000000003'
ALIASES = pci_request.AliasTable.from_config([
    json.dumps({'name': 'vgpu', 'vendor_id': '10de',
                'mdev_type': 'nvidia-22'}),
    json.dumps({'name': 'vgpu', 'vendor_id': '10de',
                'mdev_type': 'nvidia-35'}),
    json.dumps({'name': 'vf', 'vendor_id': '8086', 'product_id': '154c',
                'device_type': 'type-VF'}),
    json.dumps({'name': 'anyvgpu', 'vendor_id': '10de',
                'device_type': 'mdev-vf'}),
])
TOPOLOGY = numa.HostTopology(cells=(numa.HostCell(id=0, socket=0),
                                    numa.HostCell(id=1, socket=1)))


def slot_uuid(host, n):
    return '%08x-0000-4000-8000-%012x' % (host, n)


def gpu(address, node, mdev_type, slots):
    common = dict(vendor_id='10de', product_id='1eb8', numa_node=node,
                  mdev_type=mdev_type)
    out = [dict(common, address=address, dev_type=T.MDEV_PF)]
    out += [dict(common, address=s, dev_type=T.MDEV_VF, parent_addr=address)
            for s in slots]
    return out


def pf(address, node):
    base = address[:-4]
    common = dict(vendor_id='8086', numa_node=node)
    return [dict(common, address=address, dev_type=T.SRIOV_PF,
                 product_id='1572')] + [
        dict(common, address='%s02.%d' % (base, f), dev_type=T.SRIOV_VF,
             product_id='154c', parent_addr=address) for f in (0, 1)]


def tracker(records, specs):
    wl = whitelist_mod.Whitelist.from_config([json.dumps(s) for s in specs])
    t = manager.PciDevTracker(wl, TOPOLOGY)
    t.sync(records)
    return t


SPECS = [{'vendor_id': '10de'},
         {'address': '0000:82:*.*', 'live_migratable': True},
         {'address': '0000:83:*.*', 'live_migratable': True}]
S1, S2 = slot_uuid(1, 1), slot_uuid(1, 2)
D22 = (slot_uuid(2, 1), slot_uuid(2, 2))
D35 = (slot_uuid(2, 3), slot_uuid(2, 4))


def source_host():
    return tracker(gpu('0000:84:00.0', 0, 'nvidia-35', [S1, S2]) +
                   pf('0000:82:00.0', 0), SPECS)


def destination_host(specs=SPECS):
    return tracker(gpu('0000:84:00.0', 0, 'nvidia-22', D22) +
                   pf('0000:82:00.0', 0) +
                   gpu('0000:85:00.0', 1, 'nvidia-35', D35) +
                   pf('0000:83:00.0', 1),
                   [s for s in specs if s.get('address') != '0000:82:*.*'])


def requests(value):
    return pci_request.requests_from_extra_specs(
        {'pci_passthrough:alias': value}, ALIASES)


def boot(src, value):
    reqs = requests(value)
    devs = src.claim_instance(INST, reqs)
    return live_move.source_devices(
        devs, [d.address for d in devs], src.tags_of,
        [r.alias_name for r in reqs])


class PinnedRequestsTest(testtools.TestCase):

    def test_unpinned_the_destination_would_change_the_vgpu_type(self):
        dst = destination_host()
        (dev,) = dst.claim_instance(MIG, requests('vgpu:1'))
        self.assertEqual('nvidia-22', dev.mdev_type)

    def test_mdev_keeps_its_type_and_vf_goes_to_a_migratable_vf(self):
        src, dst = source_host(), destination_host()
        sources = boot(src, 'vgpu:2,vf:1')
        self.assertEqual([(S1, 'nvidia-35', 0, 'vgpu', None),
                          (S2, 'nvidia-35', 0, 'vgpu', None),
                          ('0000:82:02.0', None, 1, 'vf', 'true')],
                         [(s.address, s.mdev_type, s.request, s.alias,
                           s.live_migratable) for s in sources])
        self.assertEqual([], live_move.movability_problems(sources))
        reqs = requests('vgpu:2,vf:1')
        pinned, groups = live_move.destination_requests(reqs, sources)
        self.assertEqual(
            [(2, [{'vendor_id': '10de', 'mdev_type': 'nvidia-35',
                   'dev_type': 'mdev-vf'}], reqs[0].request_id),
             (1, [{'vendor_id': '8086', 'product_id': '154c',
                   'dev_type': 'type-VF', 'live_migratable': 'true'}],
              reqs[1].request_id)],
            [(p.count, p.spec, p.request_id) for p in pinned])
        got = dst.claim_instance(MIG, pinned)
        mapping = live_move.pair(groups, got, [])
        self.assertEqual({S1: D35[0], S2: D35[1],
                          '0000:82:02.0': '0000:83:02.0'}, mapping)
        self.assertEqual([reqs[0].request_id] * 2 + [reqs[1].request_id],
                         [d.request_id for d in got])

    def test_an_alias_of_any_type_is_pinned_to_the_source_type(self):
        src, dst = source_host(), destination_host()
        sources = boot(src, 'anyvgpu:1')
        pinned, groups = live_move.destination_requests(
            requests('anyvgpu:1'), sources)
        self.assertEqual([[{'vendor_id': '10de', 'dev_type': 'mdev-vf',
                            'mdev_type': 'nvidia-35'}]],
                         [p.spec for p in pinned])
        got = dst.claim_instance(MIG, pinned)
        self.assertEqual({S1: D35[0]}, live_move.pair(groups, got, []))

    def test_no_slot_of_the_type_fails_in_the_pools(self):
        src = source_host()
        dst = tracker(gpu('0000:84:00.0', 0, 'nvidia-22', D22), SPECS)
        sources = boot(src, 'vgpu:1')
        pinned, _groups = live_move.destination_requests(requests('vgpu:1'),
                                                         sources)
        before = {a: d.status for a, d in dst.devices.items()}
        exc = self.assertRaises(exception.PciDeviceRequestFailed,
                                dst.claim_instance, MIG, pinned)
        self.assertIn('vgpu', str(exc))
        self.assertEqual(before, {a: d.status for a, d in dst.devices.items()})

    def test_no_migratable_vf_fails_in_the_pools(self):
        src = source_host()
        dst = destination_host(specs=[{'vendor_id': '10de'},
                                      {'vendor_id': '8086'}])
        sources = boot(src, 'vf:1')
        pinned, _groups = live_move.destination_requests(requests('vf:1'),
                                                         sources)
        self.assertRaises(exception.PciDeviceRequestFailed,
                          dst.claim_instance, MIG, pinned)


class VgpuVfTest(testtools.TestCase):
    """A VF holding a vGPU type (NVIDIA vendor-specific VFIO) keeps the
    type as well as its vendor/product: two L40S VFs of 10de:26b9 with
    other types are not the same model."""

    def vgpu_vf(self, address, mdev_type):
        return dict(address=address, dev_type=T.SRIOV_VF, vendor_id='10de',
                    product_id='26b9', numa_node=0, mdev_type=mdev_type,
                    parent_addr='0000:41:00.0',
                    extra_info={'vgpu_framework': 'nvidia-vfio'})

    def test_the_pinned_request_names_the_type(self):
        specs = [{'vendor_id': '10de', 'live_migratable': True}]
        src = tracker([self.vgpu_vf('0000:41:00.4', 'nvidia-35')], specs)
        sources = boot(src, 'vgpu:1')
        self.assertEqual([('nvidia-35', 'nvidia-35')],
                         [(s.mdev_type, dict(s.model).get('mdev_type'))
                          for s in sources])
        self.assertIn('vGPU type nvidia-35', sources[0].describe())
        pinned, groups = live_move.destination_requests(requests('vgpu:1'),
                                                        sources)
        dst = tracker([self.vgpu_vf('0000:41:00.4', 'nvidia-22'),
                       self.vgpu_vf('0000:41:00.5', 'nvidia-35')], specs)
        got = dst.claim_instance(MIG, pinned)
        self.assertEqual({'0000:41:00.4': '0000:41:00.5'},
                         live_move.pair(groups, got, []))


class MovabilityTest(testtools.TestCase):

    def test_a_vf_without_the_tag_is_named(self):
        src = tracker(pf('0000:82:00.0', 0), [{'vendor_id': '8086'}])
        sources = boot(src, 'vf:1')
        (problem,) = live_move.movability_problems(sources)
        self.assertIn('type-VF 0000:82:02.0 (8086:154c) of alias vf is not '
                      'live-migratable', problem)
        self.assertIn('"live_migratable": true', problem)

    def test_mdevs_need_no_tag(self):
        sources = boot(source_host(), 'vgpu:1')
        self.assertEqual([], live_move.movability_problems(sources))


class MismatchTest(testtools.TestCase):

    def test_the_flavor_must_ask_for_what_the_instance_holds(self):
        sources = boot(source_host(), 'vgpu:2')
        for value, message in [
                ('vgpu:1', 'alias vgpu asks for 1 device(s), the instance '
                           'holds 2'),
                ('vf:2', 'PCI request #1 is alias vf, the instance got its '
                         'devices through alias vgpu'),
                ('vgpu:2,vf:1', 'alias vf asks for 1 device(s), the '
                                'instance holds 0')]:
            exc = self.assertRaises(exception.InvalidValue,
                                    live_move.destination_requests,
                                    requests(value), sources)
            self.assertIn(message, str(exc))
        exc = self.assertRaises(exception.InvalidValue,
                                live_move.destination_requests, [], sources)
        self.assertIn('PCI request #1, the flavor has 0', str(exc))


class PlacementPairTest(testtools.TestCase):

    def _sources(self, *types):
        return [live_move.SourceDevice(
            address=slot_uuid(1, i), dev_type=T.MDEV_VF, vendor_id='10de',
            product_id='1eb8', mdev_type=t) for i, t in enumerate(types)]

    def _slots(self, *types):
        dst = tracker(gpu('0000:84:00.0', 0, 'nvidia-22', D22) +
                      gpu('0000:85:00.0', 1, 'nvidia-35', D35), SPECS)
        by_type = {'nvidia-22': list(D22), 'nvidia-35': list(D35)}
        return [dst.devices[by_type[t].pop(0)] for t in types]

    def test_slots_pair_by_type(self):
        sources = self._sources('nvidia-35', 'nvidia-22')
        groups = live_move.groups(sources)
        self.assertEqual(
            {sources[0].address: D35[0], sources[1].address: D22[0]},
            live_move.pair(groups, [], self._slots('nvidia-22',
                                                   'nvidia-35')))

    def test_a_slot_of_another_type_is_refused(self):
        groups = live_move.groups(self._sources('nvidia-35'))
        exc = self.assertRaises(exception.LiveMigrationRefused,
                                live_move.pair, groups, [],
                                self._slots('nvidia-22'))
        self.assertIn('gives 0 slot(s) of nvidia-35 for 1 source slot',
                      str(exc))


class SourceDeviceDictTest(testtools.TestCase):

    def test_round_trip(self):
        for src in boot(source_host(), 'vgpu:1,vf:1'):
            self.assertEqual(src, live_move.SourceDevice.from_dict(
                json.loads(json.dumps(src.to_dict()))))

    def test_bad_dicts_name_the_field(self):
        good = boot(source_host(), 'vgpu:1')[0].to_dict()
        for change, field in [({'request': -1}, 'device.request'),
                              ({'request': True}, 'device.request'),
                              ({'mdev_type': 35}, 'device.mdev_type'),
                              ({'dev_type': 'gpu'}, 'device.dev_type'),
                              ({'extra': 1}, 'device'),
                              ({'address': 'x y'}, 'device address')]:
            exc = self.assertRaises(exception.InvalidValue,
                                    live_move.SourceDevice.from_dict,
                                    dict(good, **change))
            self.assertIn(field, str(exc))
