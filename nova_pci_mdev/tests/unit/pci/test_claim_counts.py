"""A claim is all of the request or nothing (issue 31), over random
three-level hosts.

Each host is a small forest drawn by hypothesis::

    PF 0000:4N:00.0   type-PF, or mdev-pf nvidia-P (slots, some to create)
      |- 0000:4N:00.K mdev-pf nvidia-P or nvidia-V (slots, some to create)
      |    '- mdev slots (existing)
      '- 0000:4N:00.K type-VF (a plain VF)

Some devices are held by another instance first; then one instance claims
one or two requests (aliases naming ``mdev-pf``, an mdev type, a plain VF,
the PF, or two of these ORed). Checked, with rules written here and not
read from the tracker:

* a claim that succeeds returns exactly the requested count per request,
  each device once, no two of them (nor one of them and a held device)
  ancestor and descendant;
* a claim that fails changes nothing;
* a single request fails only when the host cannot hold it at all: the
  largest set of free candidates none of which is above another
  (:func:`most_together`, a walk down the forest) is smaller than the
  count, and succeeds whenever it is not.

Before the fix, alias ``device_type: mdev-pf`` on a PF whose VFs are mdev
parents too got the PF alone (it blocks its VFs) and ``claimed 1
device(s)`` for ``:2``, ``:3``, ``:5``.
"""

import collections

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.pci import manager
from nova_pci_mdev.tests.unit.pci import test_manager as world
from nova_pci_mdev.virt.libvirt import records as records_mod

S = world.S
T = world.T
NODE = 'claims-1'
OWNER = 'dddddddd-0000-4000-8000-000000000001'
CLAIMER = 'dddddddd-0000-4000-8000-000000000002'
PARENT_TYPES = (T.SRIOV_PF, T.MDEV_PF)
EXPLICIT = (T.SRIOV_PF, T.MDEV_PF)
#: Request specs; a tuple of several is one request whose specs are ORed
#: (same-name aliases).
SPECS = (
    ({'dev_type': T.MDEV_PF},),
    ({'dev_type': T.MDEV_PF, 'mdev_type': 'nvidia-P'},),
    ({'dev_type': T.MDEV_PF, 'vendor_id': '10de', 'product_id': '2237'},),
    ({'mdev_type': 'nvidia-V'},),
    ({'mdev_type': 'nvidia-P'},),
    ({'dev_type': T.SRIOV_VF},),
    ({'dev_type': T.SRIOV_PF},),
    ({'dev_type': T.MDEV_PF}, {'mdev_type': 'nvidia-V'}),
    ({'dev_type': T.MDEV_PF}, {'mdev_type': 'nvidia-P'}),
    ({'dev_type': T.SRIOV_PF}, {'dev_type': T.SRIOV_VF}),
)


@st.composite
def hosts(draw):
    """Records of a random forest (see the module docstring), and the
    slots each parent can still create."""
    records = []
    for pf_index in range(draw(st.integers(1, 2))):
        numa = draw(st.sampled_from((0, 1)))
        gpu = dict(vendor_id='10de', product_id='2236', numa_node=numa)
        pf = '0000:4%d:00.0' % pf_index
        pf_type = draw(st.sampled_from(PARENT_TYPES))
        if pf_type == T.MDEV_PF:
            records.extend(_parent(draw, pf, 'nvidia-P', gpu, {}))
        else:
            records.append(world.record(pf, T.SRIOV_PF, **gpu))
        for fn in range(1, 1 + draw(st.integers(0, 3))):
            vf = '0000:4%d:00.%d' % (pf_index, fn)
            vf_gpu = dict(gpu, product_id=draw(
                st.sampled_from(('2236', '2237'))))
            if draw(st.booleans()):
                records.extend(_parent(
                    draw, vf, draw(st.sampled_from(('nvidia-P', 'nvidia-V'))),
                    vf_gpu, dict(parent_addr=pf, phys_function=pf)))
            else:
                records.append(world.record(vf, T.SRIOV_VF, parent_addr=pf,
                                            **vf_gpu))
    return records


def _parent(draw, address, mdev_type, gpu, links):
    creatable = draw(st.integers(0, 2))
    extra = dict(creatable=str(creatable)) if creatable else {}
    out = [world.record(address, T.MDEV_PF, mdev_type=mdev_type,
                        **dict(gpu, **dict(links, **extra)))]
    for n in range(draw(st.integers(0, 2))):
        slot = '%08x-0000-4000-8000-%012x' % (
            int(address.replace(':', '').replace('.', ''), 16), n)
        out.append(world.record(slot, T.MDEV_VF, parent_addr=address,
                                mdev_type=mdev_type, mdev_exists='true',
                                mdev_exposed='true', **gpu))
    return out


def new_tracker(records):
    tracker = manager.PciDevTracker(
        world.FakeWhitelist(), world.TOPOLOGY, (),
        slot_factory=records_mod.SlotFactory(NODE))
    tracker.sync(records)
    return tracker


def serves(spec, dev_type, attrs):
    """A spec's say on one device (or slot still to create), written from
    the rules of the alias: every key equal, parents only for specs
    naming their dev_type."""
    if dev_type in EXPLICIT and spec.get('dev_type') != dev_type:
        return False
    attrs = dict(attrs, dev_type=dev_type)
    return all(attrs.get(key) == value for key, value in spec.items())


def _attrs(dev):
    return dict(vendor_id=dev.vendor_id, product_id=dev.product_id,
                mdev_type=dev.mdev_type, numa_node=dev.numa_node)


def most_together(records, tracker, specs):
    """The most devices one request of ``specs`` can hold at once on the
    tracker's host: per tree, a device or the best of what is below it
    (a device taken blocks everything above and below it)."""
    initial = {r['address']: r for r in records}
    devices = tracker.devices
    children = collections.defaultdict(list)
    for address, dev in devices.items():
        if dev.parent_addr:
            children[dev.parent_addr].append(address)
    held = {a for a, d in devices.items()
            if d.status in (S.CLAIMED, S.ALLOCATED)}

    def subtree(address):
        found = {address}
        for child in children[address]:
            found |= subtree(child)
        return found

    def ancestors(address):
        out = []
        parent = devices[address].parent_addr
        while parent:
            out.append(parent)
            parent = devices[parent].parent_addr
        return out

    def free(address):
        return not ((subtree(address) | set(ancestors(address))) & held)

    def wanted(dev_type, attrs):
        return any(serves(spec, dev_type, attrs) for spec in specs)

    def best(address):
        dev = devices[address]
        below = sum(best(child) for child in children[address])
        made = sum(1 for child in children[address]
                   if child not in initial)
        left = int(initial[address]['extra_info'].get('creatable', 0)) - made
        # Slots to create: while neither the parent nor an ancestor is
        # used whole (slots of it in use do not stop it making more).
        if (dev.dev_type == T.MDEV_PF and left > 0
                and not ({address} | set(ancestors(address))) & held
                and wanted(T.MDEV_VF, _attrs(dev))):
            below += left
        me = 1 if (free(address) and wanted(dev.dev_type, _attrs(dev))) \
            else 0
        return max(me, below)

    return sum(best(a) for a, d in devices.items() if not d.parent_addr)


def related(devices, a, b):
    def up(address):
        out = set()
        parent = devices[address].parent_addr
        while parent:
            out.add(parent)
            parent = devices[parent].parent_addr
        return out
    return a in up(b) or b in up(a)


def check_claim(data):
    """One host, one earlier holder, one claim; the rules of the module
    docstring. Returns the claim's outcome (for the callers' counts)."""
    records = data.draw(hosts(), label='host')
    tracker = new_tracker(records)
    addresses = sorted(tracker.devices)
    for address in data.draw(st.lists(st.sampled_from(addresses),
                                      max_size=2), label='held first'):
        try:
            tracker.claim_devices(OWNER, [address])
        except exception.NovaPciMdevException:
            pass
    wanted = data.draw(st.lists(
        st.tuples(st.sampled_from(SPECS), st.integers(1, 5)),
        min_size=1, max_size=2), label='requests')
    requests = []
    for i, (specs, count) in enumerate(wanted):
        request = world.request(count=count, alias_name='a%d' % i)
        request.spec = [dict(spec) for spec in specs]   # ORed aliases
        requests.append(request)
    best = (most_together(records, tracker, requests[0].spec)
            if len(requests) == 1 else None)
    before = world.snapshot(tracker)
    try:
        devs = tracker.claim_instance(CLAIMER, requests)
    except exception.PciDeviceRequestFailed as exc:
        assert world.snapshot(tracker) == before, 'a failed claim changed'
        assert best is None or best < requests[0].count, (
            'refused %d of %s though %d fit together: %s'
            % (requests[0].count, requests[0].spec, best, exc))
        return 'refused'
    got = collections.Counter(dev.request_id for dev in devs)
    assert got == {r.request_id: r.count for r in requests}, (
        'asked %s, got %s' % ([(r.spec, r.count) for r in requests],
                              [d.address for d in devs]))
    assert len({d.address for d in devs}) == len(devs), devs
    assert best is None or best >= requests[0].count, (best, devs)
    devices = tracker.devices
    busy = [a for a, d in devices.items()
            if d.status in (S.CLAIMED, S.ALLOCATED)]
    for dev in devs:
        assert dev.instance_uuid == CLAIMER
        for other in busy:
            assert other == dev.address or not related(
                devices, dev.address, other), (
                    '%s and %s are both in use' % (dev.address, other))
    return 'claimed'


class ClaimCountTest(testtools.TestCase):

    def test_pf_and_vf_parents_one_alias(self):
        """The issue's host: alias mdev-pf on a PF with mdev_types whose
        VFs have mdev_types too."""
        gpu = dict(vendor_id='10de', product_id='2236', numa_node=0)
        pf = '0000:41:00.0'
        records = [world.record(pf, T.MDEV_PF, mdev_type='nvidia-P',
                                creatable='4', **gpu)]
        for fn in range(1, 5):
            records.append(world.record(
                '0000:41:00.%d' % fn, T.MDEV_PF, parent_addr=pf,
                phys_function=pf, mdev_type='nvidia-V', creatable='1',
                **dict(gpu, product_id='2237')))
        for count in (1, 2, 3, 4):
            tracker = new_tracker(records)
            devs = tracker.claim_instance(CLAIMER, [world.request(
                count=count, alias_name='whole', dev_type=T.MDEV_PF)])
            self.assertEqual(count, len(devs))
            self.assertNotIn(pf, [d.address for d in devs])
        tracker = new_tracker(records)
        before = world.snapshot(tracker)
        exc = self.assertRaises(
            exception.PciDeviceRequestFailed, tracker.claim_instance,
            CLAIMER, [world.request(count=5, alias_name='whole',
                                    dev_type=T.MDEV_PF)])
        self.assertIn('alias whole: 5 free mdev-pf devices', str(exc))
        self.assertIn('5 requested (only 4 can be taken together', str(exc))
        self.assertEqual(before, world.snapshot(tracker))

    @hypothesis.settings(max_examples=150, deadline=None, database=None,
                         derandomize=True)
    @hypothesis.given(st.data())
    def test_every_claim_is_all_or_nothing(self, data):
        check_claim(data)
