"""The public API of :mod:`nova_pci_mdev`, and the README's example of it.

The example is read from README.md and run as it is, in a child process in
an empty directory, as a reader would paste it.
"""

import os
import re
import subprocess
import sys

import fixtures
import testtools

import nova_pci_mdev
from nova_pci_mdev import data
from nova_pci_mdev import exception

README = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(nova_pci_mdev.__file__))), 'README.md')
INSTANCE = '7e1a0b2c-0d3f-4a5b-8c6d-9e0f1a2b3c4d'


def readme_example():
    """The first ``python`` block of the README's section "The library"."""
    with open(README, encoding='utf-8') as f:
        text = f.read()
    section = text.split('\n## The library\n', 1)[1].split('\n## ', 1)[0]
    return re.search(r'```python\n(.*?)```', section, re.S).group(1)


class ReadmeExampleTest(testtools.TestCase):

    def test_the_example_claims_a_vgpu_and_records_it(self):
        code = readme_example()
        self.assertLessEqual(len(code.strip().splitlines()), 6, code)
        cwd = self.useFixture(fixtures.TempDir()).path
        env = dict(os.environ, XDG_STATE_HOME=cwd)
        done = subprocess.run([sys.executable, '-c', code], cwd=cwd,
                              env=env, capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('<hostdev mode="subsystem" type="mdev"', done.stdout)
        uuid = re.search(r'<address uuid="([0-9a-f-]+)"', done.stdout)
        self.assertIsNotNone(uuid, done.stdout)
        # The claim is in the state directory the example named.
        settings = nova_pci_mdev.load_settings([data.SAMPLE_NOVA_CONF])
        with nova_pci_mdev.open_compute_host(
                data.sample_connection_uri(), os.path.join(cwd, 'state'),
                settings) as host:
            freed = host.release(INSTANCE)
        self.assertEqual([uuid.group(1)], [d.address for d in freed])


class ApiTest(testtools.TestCase):

    def test_the_names(self):
        self.assertEqual(
            ('ComputeHost', 'Hypervisor', 'NovaPciMdevException',
             'load_settings', 'open_compute_host', 'parse_flavor'),
            nova_pci_mdev.__all__)
        for name in nova_pci_mdev.__all__:
            self.assertIsNotNone(getattr(nova_pci_mdev, name), name)
        self.assertIs(exception.NovaPciMdevException,
                      nova_pci_mdev.NovaPciMdevException)
        self.assertRaises(AttributeError, getattr, nova_pci_mdev, 'wiring')

    def test_importing_the_package_imports_no_library(self):
        done = subprocess.run(
            [sys.executable, '-c',
             'import sys, nova_pci_mdev; print(sorted(m for m in '
             '("oslo_versionedobjects", "libvirt", "oslo_config") '
             'if m in sys.modules))'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual('[]', done.stdout.strip(), done.stderr)

    def test_a_bad_connection_is_named(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        settings = nova_pci_mdev.load_settings([data.SAMPLE_NOVA_CONF])
        exc = self.assertRaises(
            nova_pci_mdev.NovaPciMdevException,
            nova_pci_mdev.open_compute_host, '/etc/hosts',
            os.path.join(tmp, 'state'), settings)
        self.assertIn('/etc/hosts', str(exc))
        self.assertIn('--connection', str(exc))
        self.assertFalse(os.path.exists(os.path.join(tmp, 'state')))

    def test_bad_configuration_is_named(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[pci]\nalias = {"name": "x"}\n')
        exc = self.assertRaises(exception.ConfigErrors,
                                nova_pci_mdev.load_settings, [path])
        self.assertIn('alias', str(exc))

    def test_parse_flavor_reads_the_aliases_of_the_settings(self):
        settings = nova_pci_mdev.load_settings([data.SAMPLE_NOVA_CONF])
        flavor = nova_pci_mdev.parse_flavor(
            {'pci_passthrough:alias': 'vGPU:2', 'hw:numa_nodes': '1'},
            settings)
        self.assertEqual(1, flavor.numa_nodes)
        self.assertEqual([2], [r.count for r in flavor.pci_requests])
        exc = self.assertRaises(
            exception.Invalid, nova_pci_mdev.parse_flavor,
            {'pci_passthrough:alias': 'nosuch:1'}, settings)
        self.assertIn('nosuch', str(exc))
