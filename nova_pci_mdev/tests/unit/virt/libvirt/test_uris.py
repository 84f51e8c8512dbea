"""Connection URIs: what libvirt can open, and what an operator is told.

Table-driven for the pure answers; the real libvirt library (its test
driver) for what :func:`host.connect` says, and that libxml2 prints
nothing of its own on stderr for a host file that does not exist.
"""

import os

import fixtures
import testtools

from nova_pci_mdev import exception
from nova_pci_mdev.tests.fixtures import output
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt import uris


class HostFileTest(testtools.TestCase):

    def test_the_file_libvirt_reads(self):
        for uri, path in (
                ('test:///srv/host.xml', '/srv/host.xml'),
                ('test:/srv/host.xml', '/srv/host.xml'),
                ('test:///srv/a%20b.xml', '/srv/a b.xml'),
                ('test:///srv/host.xml?x=1#y', '/srv/host.xml'),
                ('test:///default', None),
                ('test://', None),
                ('test://remote/srv/host.xml', None),
                ('TEST:///srv/host.xml', None),         # libvirt: remote
                ('qemu:///system', None),
                ('/srv/host.xml', None),
                ('test://[x/srv/host.xml', None)):      # not a URI
            self.assertEqual(path, uris.host_file(uri), uri)


class ProblemTest(testtools.TestCase):

    def test_what_libvirt_may_open_is_not_refused(self):
        for uri in ('qemu:///system', 'qemu+ssh://root@h/system',
                    'test:///default', 'test:///srv/host.xml',
                    'test:/srv/host.xml', 'xen:', 'hail', 'my_alias-2'):
            self.assertIsNone(uris.problem(uri), uri)

    def test_a_path_is_told_how_a_host_file_is_given(self):
        for value, expected in (
                ('/srv/host.xml', 'test:///srv/host.xml'),
                ('host.xml', 'test://' + os.path.abspath('host.xml')),
                ('./data/a b.xml', 'test://' + os.path.abspath(
                    'data/a%20b.xml')),
                ('~/host.xml', 'test://' + os.path.expanduser(
                    '~/host.xml'))):
            reason = uris.problem(value)
            self.assertIn('a host file is given as %s;' % expected, reason)
            self.assertIn(uris.ACCEPTED, reason)

    def test_anything_else_without_a_scheme(self):
        for value in ('', 'qemu system', 'a.b'):
            reason = uris.problem(value)
            self.assertIn('not a libvirt URI (no scheme', reason)
            self.assertIn(uris.ACCEPTED, reason)


class HintTest(testtools.TestCase):

    def test_hints(self):
        self.assertIn('took it for an alias', uris.hint('bogus'))
        self.assertIn('names the remote host relative; a host file on this '
                      'machine is given with three slashes',
                      uris.hint('test://relative/x.xml'))
        for uri in ('qemu:///system', 'test:///missing.xml', '/x'):
            self.assertIsNone(uris.hint(uri), uri)


class ConnectTest(testtools.TestCase):
    """host.connect on the real libvirt test driver."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_missing_host_file_is_named_and_libxml2_says_nothing(self):
        path = os.path.join(self.tmp, 'missing.xml')
        for uri in ('test://' + path, 'test:' + path):
            stderr = self.useFixture(output.CapturedFd(2))
            exc = self.assertRaises(exception.HostDescriptionInvalid,
                                    host_mod.connect, uri)
            self.assertEqual(
                'Host description invalid: the host file %s of connection '
                '%s does not exist' % (path, uri), str(exc))
            self.assertEqual('', stderr.text())

    def test_libvirt_error_gets_the_hint(self):
        # (test://host/... would try the network: its hint is above)
        exc = self.assertRaises(exception.HypervisorError, host_mod.connect,
                                'bogus')
        self.assertIn("'bogus' does not include a driver name", str(exc))
        self.assertEqual([uris.hint('bogus')], exc.__notes__)

    def test_libvirt_error_without_hint(self):
        path = os.path.join(self.tmp, 'garbage.xml')
        with open(path, 'w') as handle:
            handle.write('not XML')
        exc = self.assertRaises(exception.HypervisorError, host_mod.connect,
                                'test://' + path)
        self.assertFalse(getattr(exc, '__notes__', None))
