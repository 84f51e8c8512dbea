"""The three-level model under random claims and frees (issue 13).

Runs :class:`~nova_pci_mdev.tests.unit.pci.test_three_levels.
ThreeLevelMachine` (PF -> VF parent -> mdev slot, with a plain VF and a
slot still to create): random claims of whole PFs, VF parents, slots and
VFs (by request, by address, by parent), allocations, frees, syncs and
restarts through a real store; the rules are checked after every step.
Before the fix the tracker let a PF be claimed whole while a slot of one
of its VF parents was in use.
"""

from hypothesis import stateful

from nova_pci_mdev.tests.fixtures import three_levels
from nova_pci_mdev.tests.hardening import recorder


class TrackerLevelsTest(recorder.HardeningTestCase):

    def test_three_levels(self):
        with self.record('tracker', 'random claim/free/sync/restart '
                         'sequences over PF -> VF parent (mdev-pf) -> mdev '
                         'slot, a plain VF and a slot still to create '
                         '(issue 13)', 'no device held twice; a PF in use '
                         'has nothing in use below it, a slot in use has '
                         'neither its VF parent nor its PF in use; statuses '
                         'and pools follow; freeing restores everything'
                         ) as row:
            machine = three_levels.ThreeLevelMachine

            class Counted(machine):
                def __init__(self):
                    row.cases += 1
                    super().__init__()

            settings = recorder.examples(40, 600)
            settings = type(settings)(settings, stateful_step_count=25)
            stateful.run_state_machine_as_test(Counted, settings=settings)
