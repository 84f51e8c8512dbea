"""PciDevice: serialisation, backports and the status state machine.

The parent/child scenarios run twice, once for an SR-IOV PF with VFs and
once for an mdev parent with slots: the rules must be identical.
"""

import itertools

from oslo_serialization import jsonutils
import testscenarios
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev import objects
from nova_pci_mdev.objects import base
from nova_pci_mdev.objects import fields

objects.register_all()

S = fields.PciDeviceStatus
T = fields.PciDeviceType
INST_A = '11111111-1111-1111-1111-111111111111'
INST_B = '22222222-2222-2222-2222-222222222222'
SLOT = '4b20d080-1b54-4048-85b3-a6a62d165c01'


def _slot_record():
    return dict(address=SLOT, dev_type=T.MDEV_VF, mdev_type='nvidia-35',
                parent_addr='0000:84:00.0', vendor_id='10de',
                product_id='1eb8', numa_node=1)


class TestSerialisation(testtools.TestCase):

    def test_issue_example_json_round_trip(self):
        dev = objects.PciDevice(**_slot_record())
        blob = jsonutils.dumps(dev.obj_to_primitive())
        back = objects.PciDevice.obj_from_primitive(jsonutils.loads(blob))
        for key, value in _slot_record().items():
            self.assertEqual(value, getattr(back, key), key)
        self.assertEqual('1.8', back.VERSION)

    def test_create_round_trip_all_fields(self):
        dev = objects.PciDevice.create(dict(
            _slot_record(), label='label_10de_1eb8', dev_id='mdev_x',
            extra_info={'mdev_exists': 'true'}, compute_node_id=3))
        dev.claim(INST_A)
        prim = dev.obj_to_primitive()
        back = objects.PciDevice.obj_from_primitive(prim)
        again = back.obj_to_primitive()
        # ``changes`` is a set serialised as a list: compare as sets.
        self.assertEqual(set(prim.pop('nova_object.changes')),
                         set(again.pop('nova_object.changes')))
        self.assertEqual(prim, again)
        self.assertEqual(S.CLAIMED, back.status)
        self.assertEqual(INST_A, back.instance_uuid)

    def test_nova_namespace_accepted_and_emitted(self):
        dev = objects.PciDevice(address='0000:84:00.0', dev_type=T.SRIOV_PF,
                                vendor_id='8086', product_id='1572')
        prim = base.obj_to_nova_primitive(dev, target_version='1.7')
        self.assertEqual('nova', prim['nova_object.namespace'])
        self.assertEqual('1.7', prim['nova_object.version'])
        back = objects.PciDevice.obj_from_primitive(prim)
        self.assertEqual('0000:84:00.0', back.address)

    def test_bad_address_refused(self):
        err = self.assertRaises(
            exception.InvalidValue, objects.PciDevice,
            address='0000:84:00.0/../../x')
        self.assertIn("'0000:84:00.0/../../x'", str(err))

    def test_update_device_reports_changes_and_keeps_state(self):
        dev = objects.PciDevice.create(_slot_record())
        dev.claim(INST_A)
        self.assertFalse(dev.update_device(_slot_record()))
        changed = dict(_slot_record(), numa_node=0, status=S.AVAILABLE,
                       instance_uuid=None, mdev_exists='true')
        self.assertTrue(dev.update_device(changed))
        self.assertEqual(0, dev.numa_node)
        self.assertEqual('true', dev.extra_info['mdev_exists'])
        self.assertEqual(S.CLAIMED, dev.status)
        self.assertEqual(INST_A, dev.instance_uuid)

    def test_update_device_drops_extra_keys_the_host_stopped_reporting(self):
        record = dict(_slot_record(), extra_info={
            'resource_class': 'CUSTOM_VGPU', 'mdev_exists': 'true'})
        dev = objects.PciDevice.create(record)
        dev.claim(INST_A)
        dev.extra_info = dict(dev.extra_info, missing='true')
        # The type lost its resource class; the tracker's own flag stays and
        # a record cannot set or clear it.
        self.assertTrue(dev.update_device(dict(_slot_record(), extra_info={
            'mdev_exists': 'true', 'missing': 'false'})))
        self.assertEqual({'mdev_exists': 'true', 'missing': 'true'},
                         dev.extra_info)
        self.assertFalse(dev.update_device(dict(_slot_record(), extra_info={
            'mdev_exists': 'true'})))


class TestBackports(testtools.TestCase):

    def _prim(self, target, **kw):
        rec = dict(address='0000:84:00.0', dev_type=T.SRIOV_VF,
                   vendor_id='8086', product_id='154c', status=S.AVAILABLE,
                   parent_addr='0000:84:00.1', numa_node=0,
                   request_id=None, uuid=SLOT, extra_info={})
        rec.update(kw)
        data = objects.PciDevice(**rec).obj_to_primitive(
            target_version=target)['nova_object.data']
        return data

    def test_backport_table(self):
        # (target version, field expected absent)
        for target, gone in [('1.7', 'mdev_type'), ('1.5', 'uuid'),
                             ('1.3', 'parent_addr'), ('1.2', 'numa_node'),
                             ('1.1', 'request_id')]:
            data = self._prim(target, mdev_type=None)
            self.assertNotIn(gone, data, target)

    def test_parent_addr_moves_to_extra_info_before_1_4(self):
        data = self._prim('1.3')
        self.assertEqual('0000:84:00.1', data['extra_info']['phys_function'])

    def test_refused_values(self):
        # (target, field values that the target cannot represent)
        cases = [
            ('1.7', dict(dev_type=T.MDEV_VF, mdev_type='nvidia-35',
                         address=SLOT)),
            ('1.7', dict(dev_type=T.MDEV_PF)),
            # An NVIDIA vGPU VF: Nova 34 would pass it without its type.
            ('1.7', dict(dev_type=T.SRIOV_VF, mdev_type='nvidia-1150')),
            ('1.6', dict(dev_type=T.VDPA)),
            ('1.4', dict(status=S.UNCLAIMABLE)),
            ('1.4', dict(status=S.UNAVAILABLE)),
        ]
        for target, values in cases:
            err = self.assertRaises(exception.ObjectActionError,
                                    self._prim, target, **values)
            self.assertIn(target, str(err))

    def test_plain_vf_and_gpu_pf_backport_to_1_7(self):
        self.assertNotIn('mdev_type', self._prim(
            '1.7', dev_type=T.SRIOV_VF, mdev_type=None))
        data = self._prim('1.7', dev_type=T.SRIOV_PF, parent_addr=None,
                          mdev_type='nvidia-1150')
        self.assertNotIn('mdev_type', data)

    def test_mdev_device_travels_at_1_8(self):
        data = self._prim('1.8', dev_type=T.MDEV_VF, address=SLOT,
                          mdev_type='nvidia-35')
        self.assertEqual('nvidia-35', data['mdev_type'])

    def test_list_backport(self):
        lst = objects.PciDeviceList(objects=[objects.PciDevice(
            address='0000:00:02.0', dev_type=T.STANDARD, vendor_id='8086',
            product_id='1234', mdev_type=None)])
        prim = lst.obj_to_primitive(target_version='1.3')
        child = prim['nova_object.data']['objects'][0]
        self.assertEqual('1.7', child['nova_object.version'])
        self.assertNotIn('mdev_type', child['nova_object.data'])


def _dev(address, dev_type, parent=None, status=S.AVAILABLE, **kw):
    dev = objects.PciDevice.create(dict(
        address=address, dev_type=dev_type, vendor_id='10de',
        product_id='1eb8', numa_node=0,
        parent_addr=parent.address if parent else None, **kw))
    dev.status = status
    if parent is not None:
        dev.parent_device = parent
        parent.child_devices.append(dev)
    return dev


class TestSingleDeviceTransitions(testtools.TestCase):
    """Every (status, operation) pair of a device without relatives."""

    # status -> operations that succeed and the resulting status.
    ALLOWED = {
        (S.AVAILABLE, 'claim'): S.CLAIMED,
        (S.AVAILABLE, 'allocate'): S.ALLOCATED,
        (S.AVAILABLE, 'remove'): S.REMOVED,
        (S.CLAIMED, 'allocate'): S.ALLOCATED,
        (S.CLAIMED, 'free'): S.AVAILABLE,
        (S.ALLOCATED, 'free'): S.AVAILABLE,
        (S.UNCLAIMABLE, 'remove'): S.REMOVED,
        (S.UNAVAILABLE, 'remove'): S.REMOVED,
        (S.REMOVED, 'mark_deleted'): S.DELETED,
    }
    OPS = ('claim', 'allocate', 'free', 'remove', 'mark_deleted')

    def _run(self, dev, op):
        if op in ('claim', 'allocate'):
            return getattr(dev, op)(INST_A)
        if op == 'free':
            return dev.free(INST_A)
        return getattr(dev, op)()

    def test_table(self):
        for status, op in itertools.product(S.ALL, self.OPS):
            dev = _dev('0000:00:02.0', T.STANDARD)
            dev.status = status
            if status in (S.CLAIMED, S.ALLOCATED):
                dev.instance_uuid = INST_A
            expected = self.ALLOWED.get((status, op))
            if expected is None:
                err = self.assertRaises(exception.PciDeviceInvalidStatus,
                                        self._run, dev, op)
                self.assertIn('0000:00:02.0', str(err))
                self.assertIn(status, str(err))
                self.assertEqual(status, dev.status, (status, op))
            else:
                self._run(dev, op)
                self.assertEqual(expected, dev.status, (status, op))
                owned = expected in (S.CLAIMED, S.ALLOCATED)
                self.assertEqual(INST_A if owned else None,
                                 dev.instance_uuid)

    def test_allocate_claimed_by_other_owner(self):
        dev = _dev('0000:00:02.0', T.STANDARD)
        dev.claim(INST_A)
        err = self.assertRaises(exception.PciDeviceInvalidOwner,
                                dev.allocate, INST_B)
        self.assertIn(INST_A, str(err))
        self.assertEqual(S.CLAIMED, dev.status)

    def test_free_by_other_owner(self):
        dev = _dev('0000:00:02.0', T.STANDARD)
        dev.allocate(INST_A)
        self.assertRaises(exception.PciDeviceInvalidOwner, dev.free, INST_B)
        self.assertEqual(S.ALLOCATED, dev.status)

    def test_remove_with_owner(self):
        dev = _dev('0000:00:02.0', T.STANDARD)
        dev.instance_uuid = INST_A
        self.assertRaises(exception.PciDeviceInvalidOwner, dev.remove)


class TestParentChildRules(testscenarios.WithScenarios, testtools.TestCase):
    """The PF/VF rules hold identically for mdev parents and their slots."""

    scenarios = [
        ('sriov', dict(parent_type=T.SRIOV_PF, child_type=T.SRIOV_VF,
                       children=['0000:84:02.0', '0000:84:02.1'],
                       child_kw={})),
        ('vdpa', dict(parent_type=T.SRIOV_PF, child_type=T.VDPA,
                      children=['0000:84:02.0', '0000:84:02.1'],
                      child_kw={})),
        ('mdev', dict(parent_type=T.MDEV_PF, child_type=T.MDEV_VF,
                      children=[SLOT, '5c31e191-2c65-4159-96c4-b7b73e276d12'],
                      child_kw={'mdev_type': 'nvidia-35'})),
    ]

    def setUp(self):
        super().setUp()
        self.parent = _dev('0000:84:00.0', self.parent_type,
                           mdev_type=self.child_kw.get('mdev_type'))
        self.kids = [_dev(a, self.child_type, parent=self.parent,
                          **self.child_kw) for a in self.children]

    def statuses(self):
        return [self.parent.status] + [k.status for k in self.kids]

    def test_claim_child_makes_parent_unclaimable(self):
        self.kids[0].claim(INST_A)
        self.assertEqual([S.UNCLAIMABLE, S.CLAIMED, S.AVAILABLE],
                         self.statuses())
        err = self.assertRaises(exception.PciDeviceInvalidStatus,
                                self.parent.claim, INST_B)
        self.assertIn('0000:84:00.0', str(err))

    def test_allocate_child_makes_parent_unavailable(self):
        self.kids[0].claim(INST_A)
        self.kids[0].allocate(INST_A)
        self.assertEqual([S.UNAVAILABLE, S.ALLOCATED, S.AVAILABLE],
                         self.statuses())

    def test_free_last_child_restores_parent(self):
        self.kids[0].allocate(INST_A)
        self.kids[1].claim(INST_B)
        freed = self.kids[0].free(INST_A)
        # A sibling still holds a claim: the parent stays blocked.
        self.assertEqual([S.UNCLAIMABLE, S.AVAILABLE, S.CLAIMED],
                         self.statuses())
        self.assertEqual([self.kids[0]], freed)
        freed = self.kids[1].free(INST_B)
        self.assertEqual([S.AVAILABLE] * 3, self.statuses())
        self.assertEqual([self.kids[1], self.parent], freed)

    def test_claim_parent_makes_children_unclaimable(self):
        self.parent.claim(INST_A)
        self.assertEqual([S.CLAIMED, S.UNCLAIMABLE, S.UNCLAIMABLE],
                         self.statuses())
        for kid in self.kids:
            self.assertRaises(exception.PciDeviceInvalidStatus,
                              kid.claim, INST_B)

    def test_allocate_parent_makes_children_unavailable(self):
        self.parent.claim(INST_A)
        self.parent.allocate(INST_A)
        self.assertEqual([S.ALLOCATED, S.UNAVAILABLE, S.UNAVAILABLE],
                         self.statuses())

    def test_free_parent_restores_children(self):
        self.parent.allocate(INST_A)
        freed = self.parent.free(INST_A)
        self.assertEqual([S.AVAILABLE] * 3, self.statuses())
        self.assertEqual(set([self.parent] + self.kids), set(freed))

    def test_parent_refused_while_child_busy(self):
        self.kids[1].allocate(INST_B)
        self.parent.status = S.AVAILABLE  # even if the parent looks free
        err = self.assertRaises(exception.PciDeviceChildrenBusy,
                                self.parent.claim, INST_A)
        self.assertIn(self.kids[1].address, str(err))
        self.assertEqual(S.AVAILABLE, self.parent.status)
        self.assertEqual(S.AVAILABLE, self.kids[0].status)

    def test_child_refused_while_parent_used(self):
        self.parent.allocate(INST_A)
        self.kids[0].status = S.AVAILABLE  # even if the child looks free
        err = self.assertRaises(exception.PciDeviceParentBusy,
                                self.kids[0].claim, INST_B)
        self.assertIn('0000:84:00.0', str(err))
        self.assertIn(S.ALLOCATED, str(err))
        self.assertEqual(S.AVAILABLE, self.kids[0].status)

    def test_removed_children_do_not_block_parent(self):
        self.kids[1].remove()
        self.parent.claim(INST_A)
        self.assertEqual([S.CLAIMED, S.UNCLAIMABLE, S.REMOVED],
                         self.statuses())


class TestPoolAndRequestObjects(testtools.TestCase):

    def test_pool_backport_moves_mdev_type_to_tags(self):
        pool = objects.PciDevicePool(vendor_id='10de', product_id='1eb8',
                                     numa_node=1, mdev_type='nvidia-35',
                                     tags={'dev_type': T.MDEV_VF}, count=4)
        data = pool.obj_to_primitive(target_version='1.1')[
            'nova_object.data']
        self.assertNotIn('mdev_type', data)
        self.assertEqual('nvidia-35', data['tags']['mdev_type'])
        data = pool.obj_to_primitive(target_version='1.0')[
            'nova_object.data']
        self.assertNotIn('numa_node', data)

    def test_pool_dict_round_trip(self):
        flat = {'vendor_id': '10de', 'product_id': '1eb8', 'numa_node': 0,
                'mdev_type': 'nvidia-35', 'count': 3, 'dev_type': 'mdev-vf'}
        self.assertEqual(flat, objects.PciDevicePool.from_dict(flat).to_dict())

    def _request(self, spec, policy='required'):
        return objects.InstancePCIRequest(
            count=1, spec=spec, alias_name='vGPU', numa_policy=policy,
            request_id=SLOT, requester_id=None, is_new=False)

    def test_request_backports(self):
        plain = self._request([{'vendor_id': '8086', 'dev_type': T.SRIOV_VF}])
        data = plain.obj_to_primitive(target_version='1.4')[
            'nova_object.data']
        self.assertEqual('required', data['numa_policy'])
        data = plain.obj_to_primitive(target_version='1.1')[
            'nova_object.data']
        self.assertNotIn('numa_policy', data)
        self.assertNotIn('requester_id', data)
        data = plain.obj_to_primitive(target_version='1.0')[
            'nova_object.data']
        self.assertNotIn('request_id', data)

    def test_request_with_mdev_refused_before_1_5(self):
        for spec in ([{'vendor_id': '10de', 'mdev_type': 'nvidia-35'}],
                     [{'vendor_id': '10de', 'dev_type': T.MDEV_PF}]):
            req = self._request(spec)
            err = self.assertRaises(exception.ObjectActionError,
                                    req.obj_to_primitive,
                                    target_version='1.4')
            self.assertIn('vGPU', str(err))

    def test_socket_policy_refused_before_1_4(self):
        req = self._request([{'vendor_id': '8086'}], policy='socket')
        self.assertRaises(exception.ObjectActionError,
                          req.obj_to_primitive, target_version='1.3')

    def test_requests_json_round_trip(self):
        reqs = objects.InstancePCIRequests(
            instance_uuid=INST_A,
            requests=[self._request([{'vendor_id': '10de',
                                      'mdev_type': 'nvidia-35',
                                      'dev_type': T.MDEV_VF}])])
        back = objects.InstancePCIRequests.from_json(INST_A, reqs.to_json())
        self.assertEqual(reqs.requests[0].spec, back.requests[0].spec)
        prim = jsonutils.loads(jsonutils.dumps(reqs.obj_to_primitive()))
        again = objects.InstancePCIRequests.obj_from_primitive(prim)
        self.assertEqual('nvidia-35', again.requests[0].spec[0]['mdev_type'])

    def test_requests_container_backport_backports_children(self):
        reqs = objects.InstancePCIRequests(
            instance_uuid=INST_A,
            requests=[self._request([{'vendor_id': '8086'}])])
        prim = reqs.obj_to_primitive(target_version='1.1')
        child = prim['nova_object.data']['requests'][0]
        self.assertEqual('1.4', child['nova_object.version'])
