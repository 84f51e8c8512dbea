"""A new operator's first ``--connection`` mistakes (issue 31).

Every command that works on a host, run through ``cli.main`` in this
process with a connection that cannot work: a file path given as it is
(libvirt wants ``test:///path``), text without a scheme, a test host file
that does not exist, a name libvirt takes for an alias it does not have.
Each must say what is wrong in our words (the option, the value, the
form expected; the file that does not exist), exit 2 for a value that
cannot be a URI and 3 for a host that cannot be reached, print nothing
raw (no traceback, no libxml2 line on file descriptor 2), and leave no
state directory behind: neither the default one under
``$XDG_STATE_HOME`` nor one named by ``--state-dir``.
"""

import io
import os

import fixtures

from nova_pci_mdev import data
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.fixtures import output
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.virt.libvirt import uris

INSTANCE = 'c0ffee00-0000-4000-8000-000000000031'
COMMANDS = (('devices',), ('pools',), ('inventory',), ('check-config',),
            ('claim', '--extra-spec', 'pci_passthrough:alias=vGPU:1'),
            ('release', '--instance', INSTANCE), ('restore',),
            ('live-move-source', '--instance', INSTANCE))


class ConnectionTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        # Where state directories would go (nothing else is put there).
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.xdg = os.path.join(self.tmp, 'xdg')
        self.hosts = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('XDG_STATE_HOME',
                                                     self.xdg))

    def cli(self, connection, argv, state_dir=None):
        """``nova-pci-mdev --connection C [--state-dir D] ARGV``: (exit
        code, stdout, stderr, what reached file descriptor 2)."""
        out, err = io.StringIO(), io.StringIO()
        raw = self.useFixture(output.CapturedFd(2))
        options = ['--connection', connection]
        if state_dir:
            options += ['--state-dir', state_dir]
        code = cli.main(options + list(argv), out=out, err=err)
        self.assertNotIn('Traceback', out.getvalue() + err.getvalue())
        return code, out.getvalue(), err.getvalue(), raw.text()

    def each_command(self, row, connection, code, *texts):
        """Every command fails on ``connection`` with ``code``, saying
        each of ``texts``, with nothing raw on fd 2."""
        for argv in COMMANDS:
            for state_dir in (None, os.path.join(self.tmp, 'new', 'state')):
                row.cases += 1
                got, out, err, raw = self.cli(connection, argv, state_dir)
                what = '%s %s: %s%s' % (connection, argv[0], out, err)
                self.assertEqual(code, got, what)
                for text in texts:
                    self.assertIn(text, err, what)
                self.assertEqual('', raw, what)

    def test_values_that_are_no_uri_exit_2(self):
        with self.record('exits', '--connection values that are no libvirt '
                         'URI: a host file path given as it is (absolute or '
                         'relative), text without a scheme (issue 31)',
                         'exit 2 naming --connection and the value, how a '
                         'host file is given (test:// and its absolute '
                         'path) and the URIs accepted; for every command')\
                as row:
            for value, form in (
                    (data.SAMPLE_HOST_XML,
                     'a host file is given as test://%s;'
                     % data.SAMPLE_HOST_XML),
                    ('host.xml', 'a host file is given as test://%s;'
                     % os.path.abspath('host.xml')),
                    ('qemu system', 'not a libvirt URI (no scheme')):
                self.each_command(row, value, 2, "--connection '%s'" % value,
                                  form, uris.ACCEPTED)

    def test_host_file_that_does_not_exist_exits_3(self):
        with self.record('exits', '--connection test:///FILE naming a host '
                         'file that does not exist (test:///, test:/ and '
                         'percent-escaped forms) (issue 31)', 'exit 3 naming '
                         'the file and saying it does not exist; no libxml2 '
                         'line on stderr; for every command') as row:
            missing = os.path.join(self.hosts, 'missing host.xml')
            for uri in ('test://' + missing.replace(' ', '%20'),
                        'test:' + missing.replace(' ', '%20')):
                self.each_command(row, uri, 3, 'host error: ',
                                  'the host file %s of connection %s does '
                                  'not exist' % (missing, uri))

    def test_what_libvirt_refuses_gets_a_hint(self):
        with self.record('exits', '--connection NAME without a scheme that '
                         'is no alias of libvirt.conf (issue 31)', "exit 3 "
                         "with libvirt's message and a note: taken for an "
                         'alias, the URIs accepted; for every command') as row:
            self.each_command(row, 'bogus', 3,
                              "'bogus' does not include a driver name",
                              uris.hint('bogus'))

    def host(self, name, xml, sidecar):
        with open(os.path.join(self.hosts, name + '.xml'), 'w') as handle:
            handle.write(xml)
        with open(os.path.join(self.hosts, name + '_topology.json'),
                  'w') as handle:
            handle.write(sidecar)
        return 'test://' + os.path.join(self.hosts, name + '.xml')

    def test_failed_connection_leaves_no_state_directory(self):
        with open(data.SAMPLE_HOST_XML) as handle:
            sample = handle.read()
        connections = (
            data.SAMPLE_HOST_XML, 'bogus',
            'test://' + os.path.join(self.hosts, 'no.xml'),
            self.host('garbage', '<node><device>', '{}'),
            self.host('sidecar', sample, '{"cells": ['))
        with self.record('state', 'a command that fails on its connection '
                         '(no URI, missing host file, libvirt refuses the '
                         'name or the file, bad sidecar) where no state '
                         'directory exists yet (issue 31)', 'no directory '
                         'is left behind: neither the default one (nor its '
                         'parents) nor --state-dir; the same command on the '
                         'sample host creates it') as row:
            for connection in connections:
                for argv in COMMANDS:
                    for state_dir in (None, os.path.join(self.tmp, 's')):
                        row.cases += 1
                        code, _out, err, _raw = self.cli(connection, argv,
                                                         state_dir)
                        self.assertIn(code, (2, 3), err)
                        self.assertEqual([], os.listdir(self.tmp), err)
            # The control: a command that works keeps its state there.
            row.cases += 1
            code, _out, err, _raw = self.cli(data.sample_connection_uri(),
                                             ('devices',))
            self.assertEqual(0, code, err)
            self.assertIn('state.db', os.listdir(os.path.join(
                self.xdg, 'nova-pci-mdev', 'sample-host')))
