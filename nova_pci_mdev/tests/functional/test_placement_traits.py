"""The local choice of providers is one of real Placement's candidates
(issue 31: traits were ignored on ``resources:`` claims).

Each example draws a host of two to four mdev parents::

    host-N (root; VCPU 8)
      +-- host-N_pci_0000_8X_00_0   VGPU or CUSTOM_MLX5: 1-4
      |                             CUSTOM_MDEV_TYPE_{A,B,C}
      ...

and a flavor: an unnumbered group, up to two numbered groups (one class
each, or two: no provider of ours has two), each requiring and forbidding
mdev type traits (numbered groups also a standard trait, which no provider
of ours has), with ``group_policy`` none or isolate. The tree goes to a
real Placement (in process); the unnumbered group also asks the root's
VCPU, as Nova's flavors do. Then
:func:`~nova_pci_mdev.pci.allocation.local_allocations` must succeed
exactly when Placement has a candidate, and its choice must be one of
them.

Before the fix ``trait:...=required`` and ``=forbidden`` were ignored
(an nvidia-222 provider for ``trait:CUSTOM_MDEV_TYPE_NVIDIA_223=required``),
a numbered group with two classes took two providers, and a greedy first
choice could leave a later group without the provider only it could use.
"""

import itertools
import uuid as uuid_lib

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.compute import flavor
from nova_pci_mdev.pci import allocation
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import placement
from nova_pci_mdev.tests.fixtures import placement as placement_fixture
from nova_pci_mdev.tests.unit.pci import test_manager as world
from nova_pci_mdev.virt.libvirt import records as records_mod

T = world.T
TYPES = ('a', 'b', 'c')
OURS = tuple(placement.resource_class_trait_name(t) for t in TYPES)
STANDARD = 'HW_CPU_X86_AVX2'
CLASSES = ('VGPU', 'CUSTOM_MLX5')
_HOSTS = itertools.count()


@st.composite
def parents(draw):
    """(mdev type, resource class, free slots) of 2-4 parents."""
    return draw(st.lists(st.tuples(st.sampled_from(TYPES),
                                   st.sampled_from(CLASSES),
                                   st.integers(1, 4)),
                         min_size=2, max_size=4))


def _traits(draw, foreign):
    names = OURS + ((STANDARD,) if foreign else ())
    required = draw(st.sets(st.sampled_from(names), max_size=2))
    forbidden = draw(st.sets(st.sampled_from(names), max_size=1)) - required
    return flavor.Traits(required=frozenset(required),
                         forbidden=frozenset(forbidden))


@st.composite
def flavors(draw):
    """(resource groups, traits per group, isolate)."""
    groups, traits = {}, {}
    unnumbered = draw(st.dictionaries(st.sampled_from(CLASSES),
                                      st.integers(1, 3), max_size=2))
    if unnumbered:
        groups[''] = unnumbered
    if unnumbered or draw(st.booleans()):
        # Without resources of ours too: then it is the root's VCPU.
        traits[''] = _traits(draw, foreign=False)
    for suffix in ('1', '2')[:draw(st.integers(0, 2))]:
        groups[suffix] = draw(st.dictionaries(
            st.sampled_from(CLASSES), st.integers(1, 3), min_size=1,
            max_size=draw(st.sampled_from((1, 1, 1, 2)))))
        traits[suffix] = _traits(draw, foreign=True)
    if not groups:
        groups[''] = {'VGPU': 1}
    return groups, traits, draw(st.booleans())


def host(nodename, drawn):
    """A tracker of the drawn parents and its provider tree."""
    records = [world.record('0000:%02x:00.0' % (0x80 + i), T.MDEV_PF,
                            vendor_id='10de', product_id='1eb8',
                            numa_node=i % 2, mdev_type=mdev_type,
                            resource_class=rc, creatable=str(free))
               for i, (mdev_type, rc, free) in enumerate(drawn)]
    tracker = manager.PciDevTracker(
        world.FakeWhitelist(), world.TOPOLOGY, (),
        slot_factory=records_mod.SlotFactory(nodename))
    tracker.sync(records)
    root = str(uuid_lib.uuid5(uuid_lib.NAMESPACE_DNS, nodename))
    tree = placement.build_provider_tree(
        nodename, root, tracker.devices.values(),
        root_inventories={'VCPU': 8})
    return tracker, tree


def candidates(client, tree, groups, traits, isolate):
    """Placement's allocation requests, without the root's VCPU."""
    children = {p.uuid: p for p in tree.children}
    query = {}
    for suffix in set(groups) | set(traits):
        rule = traits.get(suffix) or flavor.Traits()
        query[suffix] = {'resources': dict(groups.get(suffix, {})),
                         'required': sorted(rule.required) + [
                             '!' + t for t in sorted(rule.forbidden)]}
    unnumbered = query.setdefault('', {'resources': {}, 'required': []})
    unnumbered['resources']['VCPU'] = 1
    unnumbered['in_tree'] = tree.root.uuid
    # The amounts come from ``mappings`` (which providers serve which
    # group), not from ``allocations``: Placement 16.0.0 gives wrong
    # amounts when the unnumbered group and a numbered group take the same
    # class from one provider without group_policy=none (it adds one
    # group's amount into a request object other candidates share: VGPU
    # 2 on a provider of 1). With one numbered group, none is isolate.
    numbered = [s for s in groups if s]
    body = client.allocation_candidates(
        groups=query, group_policy=(
            'isolate' if isolate and len(numbered) > 1 else 'none')
        if numbered else None)
    found = []
    for request in body['allocation_requests']:
        chosen = {}
        for suffix, providers in request['mappings'].items():
            for rp in providers:
                if rp == tree.root.uuid:
                    continue
                serves = children[rp].inventories
                for rc, amount in groups.get(suffix, {}).items():
                    if rc in serves:
                        chosen.setdefault(rp, {})
                        chosen[rp][rc] = chosen[rp].get(rc, 0) + amount
        found.append(chosen)
    return found


def check(client, drawn, wanted):
    """The drawn host and flavor through Placement (``client``) and
    locally: 'chosen' (one of Placement's candidates) or 'refused' (and
    Placement has none); AssertionError otherwise."""
    groups, traits, isolate = wanted
    nodename = 'host-%d' % next(_HOSTS)
    tracker, tree = host(nodename, drawn)
    client.sync_tree(tree)
    found = candidates(client, tree, groups, traits, isolate)
    try:
        chosen = allocation.local_allocations(
            tree, tracker, groups, isolate=isolate, traits=traits)
    except exception.RequestNotSatisfiable as exc:
        if found:
            raise AssertionError('refused, but Placement has candidates '
                                 '%s: %s' % (found, exc))
        return 'refused'
    if chosen not in found:
        raise AssertionError('chose %s, not one of Placement\'s candidates '
                             '%s' % (chosen, found))
    return 'chosen'


def known_traits(fixture):
    """Create the custom traits the drawn flavors name (Placement refuses
    an unknown one)."""
    for name in OURS:
        fixture.write('PUT', '/traits/%s' % name)


class LocalChoiceIsACandidateTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        known_traits(self.placement)

    def check(self, drawn, wanted):
        return check(self.placement.client, drawn, wanted)

    def test_the_issue(self):
        """Two GPUs of different types: the trait picks the provider."""
        drawn = [('a', 'VGPU', 4), ('b', 'VGPU', 4)]
        a, b = OURS[:2]
        for rule, outcome in (
                (flavor.Traits(required=frozenset((b,))), 'chosen'),
                (flavor.Traits(forbidden=frozenset((a,))), 'chosen'),
                (flavor.Traits(required=frozenset((OURS[2],))), 'refused'),
                (flavor.Traits(forbidden=frozenset((a, b))), 'refused')):
            self.assertEqual(outcome, self.check(
                drawn, ({'': {'VGPU': 1}}, {'': rule}, False)), rule)

    def test_a_later_group_keeps_the_provider_only_it_can_use(self):
        drawn = [('a', 'VGPU', 2), ('b', 'VGPU', 2)]
        wanted = ({'': {'VGPU': 1}, '1': {'VGPU': 2}},
                  {'1': flavor.Traits(required=frozenset((OURS[0],)))},
                  False)
        self.assertEqual('chosen', self.check(drawn, wanted))

    def test_unnumbered_traits_without_resources_of_ours(self):
        drawn = [('a', 'VGPU', 2), ('b', 'VGPU', 2)]
        for rule, outcome in (
                (flavor.Traits(required=frozenset((OURS[0],))), 'refused'),
                (flavor.Traits(forbidden=frozenset((OURS[0],))), 'chosen')):
            self.assertEqual(outcome, self.check(
                drawn, ({'1': {'VGPU': 1}}, {'': rule}, False)))

    def test_a_numbered_group_is_one_provider(self):
        drawn = [('a', 'VGPU', 2), ('b', 'CUSTOM_MLX5', 2)]
        wanted = ({'1': {'VGPU': 1, 'CUSTOM_MLX5': 1}}, {}, False)
        self.assertEqual('refused', self.check(drawn, wanted))

    @hypothesis.settings(max_examples=25, deadline=None, database=None,
                         derandomize=True)
    @hypothesis.given(parents(), flavors())
    def test_local_choice_is_a_placement_candidate(self, drawn, wanted):
        self.check(drawn, wanted)
