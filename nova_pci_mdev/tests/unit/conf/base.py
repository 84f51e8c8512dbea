"""Helpers for configuration tests: write a nova.conf, load it."""

import os
import textwrap

import fixtures
import testtools

from nova_pci_mdev import conf


class ConfTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        # oslo.config reports deprecated names through logging.
        self.useFixture(fixtures.FakeLogger(level=40))

    def write(self, text, name='nova.conf'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(textwrap.dedent(text))
        return path

    def load(self, text):
        return conf.new_config([self.write(text)])

    def problems(self, text):
        return conf.validate(self.load(text))

    def errors(self, text):
        return [p for p in self.problems(text) if p.severity == 'error']
