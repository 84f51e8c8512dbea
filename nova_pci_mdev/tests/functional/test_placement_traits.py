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

import hypothesis
import testtools

from nova_pci_mdev.compute import flavor
from nova_pci_mdev.tests.fixtures import placement as placement_fixture
from nova_pci_mdev.tests.fixtures import placement_traits as traits


class LocalChoiceIsACandidateTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        traits.known_traits(self.placement)

    def check(self, drawn, wanted):
        return traits.check(self.placement.client, drawn, wanted)

    def test_the_issue(self):
        """Two GPUs of different types: the trait picks the provider."""
        drawn = [('a', 'VGPU', 4), ('b', 'VGPU', 4)]
        a, b = traits.OURS[:2]
        for rule, outcome in (
                (flavor.Traits(required=frozenset((b,))), 'chosen'),
                (flavor.Traits(forbidden=frozenset((a,))), 'chosen'),
                (flavor.Traits(required=frozenset((traits.OURS[2],))), 'refused'),
                (flavor.Traits(forbidden=frozenset((a, b))), 'refused')):
            self.assertEqual(outcome, self.check(
                drawn, ({'': {'VGPU': 1}}, {'': rule}, False)), rule)

    def test_a_later_group_keeps_the_provider_only_it_can_use(self):
        drawn = [('a', 'VGPU', 2), ('b', 'VGPU', 2)]
        wanted = ({'': {'VGPU': 1}, '1': {'VGPU': 2}},
                  {'1': flavor.Traits(required=frozenset((traits.OURS[0],)))},
                  False)
        self.assertEqual('chosen', self.check(drawn, wanted))

    def test_unnumbered_traits_without_resources_of_ours(self):
        drawn = [('a', 'VGPU', 2), ('b', 'VGPU', 2)]
        for rule, outcome in (
                (flavor.Traits(required=frozenset((traits.OURS[0],))), 'refused'),
                (flavor.Traits(forbidden=frozenset((traits.OURS[0],))), 'chosen')):
            self.assertEqual(outcome, self.check(
                drawn, ({'1': {'VGPU': 1}}, {'': rule}, False)))

    def test_a_numbered_group_is_one_provider(self):
        drawn = [('a', 'VGPU', 2), ('b', 'CUSTOM_MLX5', 2)]
        wanted = ({'1': {'VGPU': 1, 'CUSTOM_MLX5': 1}}, {}, False)
        self.assertEqual('refused', self.check(drawn, wanted))

    @hypothesis.settings(max_examples=25, deadline=None, database=None,
                         derandomize=True)
    @hypothesis.given(traits.parents(), traits.flavors())
    def test_local_choice_is_a_placement_candidate(self, drawn, wanted):
        self.check(drawn, wanted)
