"""Slot UUIDs of a parent: stability, order, cap and the creation invariant."""

import uuid as uuid_lib

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.virt.libvirt import slots

NODE = 'compute-1'
PARENT = '0000:84:00.0'
TYPE = 'nvidia-222'
E1 = '4b20d080-1b54-4048-85b3-a6a62d165c01'
E2 = '0b20d080-1b54-4048-85b3-a6a62d165c02'


def seq(*indexes):
    return [slots.slot_uuid(NODE, PARENT, TYPE, i) for i in indexes]


def create(existing, available, uuid):
    """What the host looks like after the mdev ``uuid`` was created."""
    return list(existing) + [uuid], available - 1


class SlotUuidTest(testtools.TestCase):

    def test_pinned_value(self):
        # Slot identities are persisted; changing the namespace or the key
        # format would orphan every claimed slot.
        self.assertEqual('f4e54165-1ca8-5e96-a0d6-a13b5d928aba',
                         slots.slot_uuid(NODE, PARENT, TYPE, 0))

    @hypothesis.given(
        nodename=st.text(min_size=1).filter(
            lambda t: not any(0xd800 <= ord(c) <= 0xdfff for c in t)),
        index=st.integers(min_value=0, max_value=2 ** 70))
    def test_same_as_stdlib_uuid5(self, nodename, index):
        key = '%s/%s/%s/%d' % (nodename, PARENT, TYPE, index)
        self.assertEqual(str(uuid_lib.uuid5(slots.SLOT_NAMESPACE, key)),
                         slots.slot_uuid(nodename, PARENT, TYPE, index))

    def test_every_input_matters(self):
        base = slots.slot_uuid(NODE, PARENT, TYPE, 0)
        variants = [('compute-2', PARENT, TYPE, 0),
                    (NODE, '0000:85:00.0', TYPE, 0),
                    (NODE, PARENT, 'nvidia-223', 0),
                    (NODE, PARENT, TYPE, 1),
                    (NODE, 'mtty', 'mtty-1', 0)]
        seen = {base}
        for args in variants:
            value = slots.slot_uuid(*args)
            self.assertNotIn(value, seen, args)
            seen.add(value)

    def test_address_is_normalised(self):
        self.assertEqual(slots.slot_uuid(NODE, '0000:D8:00.0', TYPE, 3),
                         slots.slot_uuid(NODE, '0000:d8:00.0', TYPE, 3))

    def test_bad_inputs(self):
        table = [((NODE, PARENT, TYPE, -1), 'slot index'),
                 ((NODE, PARENT, TYPE, True), 'slot index'),
                 ((NODE, PARENT, TYPE, '0'), 'slot index'),
                 (('', PARENT, TYPE, 0), 'nodename'),
                 ((None, PARENT, TYPE, 0), 'nodename'),
                 ((NODE, '../x', TYPE, 0), '../x'),
                 ((NODE, PARENT, 'a/b', 0), 'a/b')]
        for args, word in table:
            exc = self.assertRaises(exception.Invalid, slots.slot_uuid, *args)
            self.assertIn(word, str(exc))


class SlotsForParentTest(testtools.TestCase):

    def test_table(self):
        table = [
            # (existing, available, max, expected)
            ([], 0, None, []),
            ([], 3, None, seq(0, 1, 2)),
            ([E1], 2, None, [E1] + seq(0, 1)),
            ([E1, E2], 1, None, [E2, E1] + seq(0)),     # existing sorted
            ([E1, E1.upper()], 1, None, [E1] + seq(0)),  # deduplicated
            ([], 5, 2, seq(0, 1)),
            ([E1], 5, 2, [E1] + seq(0)),
            ([E1], 5, 1, [E1]),
            ([E1, E2], 5, 1, [E2, E1]),    # existing never dropped
            ([], 5, 0, []),
            ([E1], 0, None, [E1]),
        ]
        for existing, available, cap, expected in table:
            self.assertEqual(
                expected,
                slots.slots_for_parent(NODE, PARENT, TYPE, existing,
                                       available, cap),
                (existing, available, cap))

    def test_existing_slot_uuid_is_skipped(self):
        # The mdev of slot 0 exists: it is listed once, as existing, and the
        # creatable slots continue the sequence.
        s0, s1, s2 = seq(0, 1, 2)
        self.assertEqual(sorted([s0]) + [s1, s2],
                         slots.slots_for_parent(NODE, PARENT, TYPE, [s0], 2,
                                                None))

    def test_stable_across_calls(self):
        first = slots.slots_for_parent(NODE, PARENT, TYPE, [E1], 8, 6)
        self.assertEqual(first, slots.slots_for_parent(
            NODE, PARENT, TYPE, [E1], 8, 6))

    def test_creating_any_slot_keeps_the_set(self):
        table = [([], 3, None), ([E1], 4, None), ([E1, E2], 4, 5),
                 ([], 6, 2), (seq(1), 3, None), (seq(0, 2), 2, 4)]
        for existing, available, cap in table:
            before = slots.slots_for_parent(NODE, PARENT, TYPE, existing,
                                            available, cap)
            creatable = [u for u in before if u not in set(existing)]
            for uuid in creatable:
                now_existing, now_available = create(existing, available,
                                                     uuid)
                after = slots.slots_for_parent(
                    NODE, PARENT, TYPE, now_existing, now_available, cap)
                self.assertEqual(set(before), set(after),
                                 (existing, available, cap, uuid))
                self.assertEqual(len(before), len(after))

    def test_unknown_mdev_changes_the_set(self):
        # Control for the invariant: an mdev created outside the slot
        # sequence takes a place, so one creatable slot goes away.
        before = slots.slots_for_parent(NODE, PARENT, TYPE, [], 2, None)
        after = slots.slots_for_parent(NODE, PARENT, TYPE, [E1], 1, None)
        self.assertEqual(set(before[:1]) | {E1}, set(after))

    def test_bad_inputs(self):
        table = [(([], -1, None), 'availableInstances'),
                 (([], '3', None), 'availableInstances'),
                 (([], 3, -1), 'max_instances'),
                 (([], 3, 2.0), 'max_instances'),
                 ((['not-a-uuid'], 3, None), 'not-a-uuid')]
        for (existing, available, cap), word in table:
            exc = self.assertRaises(
                exception.Invalid, slots.slots_for_parent, NODE, PARENT,
                TYPE, existing, available, cap)
            self.assertIn(word, str(exc))


class SlotsPropertyTest(testtools.TestCase):

    @hypothesis.settings(max_examples=150, deadline=None, database=None)
    @hypothesis.given(
        n_foreign=st.integers(0, 3),
        sequence_existing=st.sets(st.integers(0, 10), max_size=4),
        available=st.integers(0, 12),
        cap=st.one_of(st.none(), st.integers(0, 16)),
        pick=st.integers(0, 100))
    def test_invariants(self, n_foreign, sequence_existing, available, cap,
                        pick):
        foreign = [str(uuid_lib.UUID(int=i + 1)) for i in range(n_foreign)]
        existing = foreign + seq(*sorted(sequence_existing))
        result = slots.slots_for_parent(NODE, PARENT, TYPE, existing,
                                        available, cap)
        # No duplicates, existing first, size rule of the docstring.
        self.assertEqual(len(result), len(set(result)))
        self.assertEqual(sorted(existing), result[:len(existing)])
        total = len(existing) + available
        expected = total if cap is None else max(len(existing),
                                                 min(total, cap))
        self.assertEqual(expected, len(result))
        creatable = result[len(existing):]
        if creatable:
            uuid = creatable[pick % len(creatable)]
            after = slots.slots_for_parent(
                NODE, PARENT, TYPE, existing + [uuid], available - 1, cap)
            self.assertEqual(set(result), set(after))
