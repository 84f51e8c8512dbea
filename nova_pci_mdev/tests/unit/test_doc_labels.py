"""tools/check-doc-labels: a label stays on the section it named.

Two small documentation trees, as the base and the patched Nova tree,
parsed with docutils by the tool itself: a section inserted between a
label and its section moves the label, which the tool reports; other
insertions do not.
"""

import os

import fixtures
import testtools

from nova_pci_mdev.tests.fixtures import tools

BASE = '''
Guide
=====

Intro.

.. _pci-tracking-in-placement:

PCI tracking in Placement
-------------------------

See :ref:`pci-tracking-in-placement`.
'''
# the mdev section inserted after the label, as the series once did
MOVED = BASE.replace(
    '.. _pci-tracking-in-placement:\n',
    '.. _pci-tracking-in-placement:\n\nMediated devices\n'
    '----------------\n\nText.\n')
# the same section inserted before the label, with its own label
KEPT = BASE.replace(
    '.. _pci-tracking-in-placement:\n',
    '.. _pci-mdev-aliases:\n\nMediated devices\n----------------\n\n'
    'Text, :ref:`pci-mdev-aliases`.\n\n.. _pci-tracking-in-placement:\n')


class DocLabelsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tool = tools.load('check-doc-labels')
        self.tool._prepare_docutils()

    def tree(self, text):
        root = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(root, 'doc', 'source', 'admin')
        os.makedirs(path)
        with open(os.path.join(path, 'pci.rst'), 'w') as f:
            f.write(text)
        return root

    def check(self, patched_text, base_text=BASE):
        base, patched = self.tree(base_text), self.tree(patched_text)
        return self.tool.compare(
            self.tool.labels(base), self.tool.labels(patched),
            self.tool.references(base), self.tool.references(patched))

    def test_label_moved_by_an_inserted_section(self):
        rows, problems = self.check(MOVED)
        self.assertEqual(
            ["label 'pci-tracking-in-placement' named admin/pci.rst: Guide "
             "/ PCI tracking in Placement and now names admin/pci.rst: "
             "Guide / Mediated devices"], problems)
        self.assertEqual(
            [('pci-tracking-in-placement', 1,
              ('admin/pci.rst', ('Guide', 'PCI tracking in Placement')),
              False)], rows)

    def test_section_inserted_before_the_label(self):
        rows, problems = self.check(KEPT)
        self.assertEqual([], problems)
        self.assertEqual([True], [same for *_, same in rows])

    def test_removed_label_and_undefined_reference(self):
        gone = BASE.replace('.. _pci-tracking-in-placement:\n', '')
        _, problems = self.check(
            gone + '\nAnd :ref:`Text <nowhere>`.\n')
        self.assertEqual(
            ["label 'pci-tracking-in-placement' of admin/pci.rst is gone",
             "reference to undefined label 'nowhere'"], problems)
