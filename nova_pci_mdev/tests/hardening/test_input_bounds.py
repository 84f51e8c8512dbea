"""Every file the tool reads is bounded (issue 31, item 3).

What the tool reads besides libvirt (the operator's ``--source`` and
``--domain-xml``, a test host's sidecar and the NVIDIA sysfs tree it
names, the emulated host's files in the state directory) is read by
:mod:`nova_pci_mdev.input_files` only: a regular file, of a bounded size,
JSON of a bounded depth; a tree is copied as directories and regular files
only, never through a link. Each story runs ``cli.main`` in this process
on copies of the bundled hosts and checks the exit code (2 for the
operator's file, 3 for the host's or the state directory's) and that the
message names the file and the rule; never a traceback, never a hang
(a FIFO the product opened anyway gets its end of file after 10 s from
:class:`~..fixtures.fifos.Unblocker`, and the test fails on the message).
"""

import io
import json
import os
import shutil

import fixtures

from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import input_files
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.fixtures import fifos
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.virt.libvirt import config
from nova_pci_mdev.virt.libvirt import migration
from nova_pci_mdev.virt.libvirt import xmlsafe

VGPU = 'pci_passthrough:alias=vGPU:1'
INSTANCE = 'c0ffee00-0000-4000-8000-000000000031'
VF = '0000:41:00.4'
DEEP = 100000


def _write(path, text):
    with open(path, 'w') as handle:
        handle.write(text)
    return path


class InputBoundsTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.runs = 0

    def sample_host(self, sidecar=None):
        """A copy of the bundled sample host; ``sidecar(dict)`` edits its
        sidecar. Returns the connection URI."""
        path = os.path.join(self.tmp, 'sample.xml')
        shutil.copy(data.SAMPLE_HOST_XML, path)
        with open(data.SAMPLE_HOST_TOPOLOGY) as handle:
            doc = json.load(handle)
        if sidecar is not None:
            sidecar(doc)
        _write(os.path.join(self.tmp, 'sample_topology.json'),
               json.dumps(doc))
        return 'test://' + path

    def l40s_host(self):
        """A copy of the bundled L40S host and its sysfs tree: (URI, the
        tree's VF directory of ``VF``, the tree)."""
        host = os.path.join(self.tmp, 'l40s')
        os.mkdir(host)
        shutil.copy(data.L40S_HOST_XML, os.path.join(host, 'l40s_host.xml'))
        shutil.copy(data.L40S_HOST_TOPOLOGY,
                    os.path.join(host, 'l40s_host_topology.json'))
        tree = os.path.join(host, 'l40s_sysfs')
        shutil.copytree(data.L40S_SYSFS, tree)
        vf_dir = os.path.join(tree, 'sys', 'bus', 'pci', 'devices', VF,
                              'nvidia')
        return 'test://' + os.path.join(host, 'l40s_host.xml'), vf_dir, tree

    def cli(self, uri, *argv, expect=0, state=None, conf=None):
        self.runs += 1
        state = state or os.path.join(self.tmp, 'state-%d' % self.runs)
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--connection', uri, '--state-dir', state,
                         '--config-file', conf or data.SAMPLE_NOVA_CONF]
                        + list(argv), out=out, err=err)
        text = out.getvalue() + err.getvalue()
        self.assertNotIn('Traceback', text)
        self.assertEqual(expect, code, '%s: %s' % (' '.join(argv), text))
        return err.getvalue()

    def test_documents_nested_too_deep(self):
        """Python's json decoder answers 100,000 nested arrays with
        RecursionError, and ElementTree writes a tree by recursion."""
        deep = '[' * DEEP + ']' * DEEP
        just_over = '[' * (input_files.MAX_DEPTH + 1) + ']' * (
            input_files.MAX_DEPTH + 1)
        with self.record('exits', 'JSON and guest XML nested too deep: '
                         'live-move-check --source, a sidecar, its '
                         'nvidia_emulation.json, mdevs.json, --domain-xml '
                         '(issue 31)', 'exit 2 for the operator\'s file, 3 '
                         'for the host\'s or the state\'s, naming the file '
                         'and the depth allowed; never RecursionError') as row:
            for text in (deep, just_over):
                row.cases += 1
                source = _write(os.path.join(self.tmp, 'move.json'), text)
                err = self.cli(self.sample_host(), 'live-move-check',
                               '--source', source, '--extra-spec', VGPU,
                               expect=2)
                self.assertIn('--source %r' % source, err)
                self.assertIn('levels of arrays and objects', err)

                row.cases += 1
                uri = self.sample_host()
                _write(os.path.join(self.tmp, 'sample_topology.json'), text)
                err = self.cli(uri, 'devices', expect=3)
                self.assertIn('sample_topology.json', err)
                self.assertIn('levels of arrays and objects', err)

                row.cases += 1
                uri, _vf_dir, tree = self.l40s_host()
                _write(os.path.join(tree, 'nvidia_emulation.json'), text)
                err = self.cli(uri, 'devices', expect=3,
                               conf=data.L40S_NOVA_CONF)
                self.assertIn('nvidia_emulation.json', err)
                self.assertIn('levels of arrays and objects', err)
                shutil.rmtree(os.path.dirname(tree))

                row.cases += 1
                uri = self.sample_host()
                state = os.path.join(self.tmp, 'deep-state')
                self.cli(uri, 'devices', state=state)
                _write(os.path.join(state, 'mdevs.json'), text)
                err = self.cli(uri, 'devices', state=state, expect=3)
                self.assertIn(os.path.join(state, 'mdevs.json'), err)
                self.assertIn('levels of arrays and objects', err)
                shutil.rmtree(state)
            nested = '<a>' * DEEP + '</a>' * DEEP
            domain = ('<domain type="kvm"><name>g</name><devices>%s'
                      '</devices></domain>' % nested)
            for parse in (migration.parse_domain,
                          config.LibvirtConfigGuest.parse_str,
                          lambda text: config.LibvirtConfigGuestRawDevice(
                              xml=nested)):
                row.cases += 1
                exc = self.assertRaises(exception.LibvirtXmlError, parse,
                                        domain)
                self.assertIn('nested more than %d elements deep'
                              % xmlsafe.GUEST_MAX_DEPTH, str(exc))

    def test_fifos_in_place_of_state_and_tree_files(self):
        """mdevs.json of the emulated host and current_vgpu_type of the
        emulated NVIDIA sysfs copy replaced by FIFOs: every command used to
        block on them forever."""
        uri = self.sample_host()
        state = os.path.join(self.tmp, 'fifo-state')
        self.cli(uri, 'claim', '--extra-spec', VGPU, '--instance', INSTANCE,
                 state=state)
        mdevs = os.path.join(state, 'mdevs.json')
        os.unlink(mdevs)
        os.mkfifo(mdevs)
        l40s, _vf_dir, _tree = self.l40s_host()
        l40s_state = os.path.join(self.tmp, 'l40s-state')
        self.cli(l40s, 'devices', state=l40s_state, conf=data.L40S_NOVA_CONF)
        current = os.path.join(l40s_state, 'nvidia-sysfs', 'sys', 'bus',
                               'pci', 'devices', VF, 'nvidia',
                               'current_vgpu_type')
        os.unlink(current)
        os.mkfifo(current)
        unblock = fifos.Unblocker(10, mdevs, current)
        unblock.start()
        self.addCleanup(unblock.done.set)
        with self.record('exits', 'a FIFO in place of mdevs.json (devices, '
                         'claim, release) or of a file of the emulated '
                         'NVIDIA sysfs copy (issue 31)', 'exit 3 at once, '
                         'naming the file and "a FIFO, expected a regular '
                         'file"; never blocks') as row:
            for argv in (('devices',),
                         ('claim', '--extra-spec', VGPU),
                         ('release', '--instance', INSTANCE)):
                row.cases += 1
                err = self.cli(uri, *argv, state=state, expect=3)
                self.assertIn(mdevs, err)
                self.assertIn('is a FIFO, expected a regular file', err)
            for argv in (('devices',), ('claim', '--extra-spec', VGPU)):
                row.cases += 1
                err = self.cli(l40s, *argv, state=l40s_state, expect=3,
                               conf=data.L40S_NOVA_CONF)
                self.assertIn(current, err)
                self.assertIn('is a FIFO, expected a regular file', err)

    def test_sidecar_sysfs_trees_that_leave_or_never_end(self):
        """The sidecar's nvidia_sysfs tree is copied into the state
        directory on first use: a link to /dev/zero in it was copied until
        the disk was full, a link to ../../../../etc copied /etc. Here the
        links lead to stand-ins that cannot fill a disk (a decoy file and
        directory outside the tree, a FIFO, /dev/null)."""
        decoy_dir = os.path.join(self.tmp, 'decoy')
        os.mkdir(decoy_dir)
        decoy = _write(os.path.join(decoy_dir, 'secret'), 'not yours\n')
        fifo = os.path.join(self.tmp, 'outside-fifo')
        os.mkfifo(fifo)
        unblock = fifos.Unblocker(10, fifo)
        unblock.start()
        self.addCleanup(unblock.done.set)

        def too_deep(vf_dir):
            path = vf_dir
            for _ in range(input_files.MAX_TREE_DEPTH + 1):
                path = os.path.join(path, 'd')
            os.makedirs(path)
            return os.path.join(vf_dir, 'd')

        def link(target, name='vgpu_params'):
            def plant(vf_dir):
                os.symlink(target, os.path.join(vf_dir, name))
                return os.path.join(vf_dir, name)
            return plant

        def own_fifo(vf_dir):
            os.mkfifo(os.path.join(vf_dir, 'vgpu_params'))
            return os.path.join(vf_dir, 'vgpu_params')

        cases = (
            (link('/dev/null'), 'is a symbolic link'),
            (link(decoy), 'is a symbolic link'),
            (link(os.path.relpath(decoy_dir, self.tmp + '/l40s/l40s_sysfs/'
                                  'sys/bus/pci/devices/%s/nvidia' % VF),
                  name='etc'), 'is a symbolic link'),
            (link(fifo), 'is a symbolic link'),
            (own_fifo, 'is a FIFO'),
            (too_deep, 'directories below the top of the tree'))
        with self.record('exits', 'a sidecar nvidia_sysfs tree with a link '
                         'to a device, a file or a directory outside it '
                         '(../../etc), a FIFO, or nested too deep (issue 31)',
                         'exit 3 naming the entry and the rule; nothing of '
                         'it copied into the state directory') as row:
            for plant, rule in cases:
                row.cases += 1
                uri, vf_dir, tree = self.l40s_host()
                bad = plant(vf_dir)
                state = os.path.join(self.tmp, 'tree-state')
                err = self.cli(uri, 'devices', state=state, expect=3,
                               conf=data.L40S_NOVA_CONF)
                self.assertIn(bad, err)
                self.assertIn(rule, err)
                copied = [name for _dir, _dirs, files in os.walk(state)
                          for name in files]
                self.assertNotIn('secret', copied)
                self.assertNotIn('nvidia-sysfs', os.listdir(state))
                shutil.rmtree(state)
                shutil.rmtree(os.path.dirname(tree))

    def test_hypervisor_version_with_other_digits(self):
        """str.isdigit takes '²' and '٢', which int refuses or reads."""
        with self.record('exits', 'a sidecar hypervisor version with '
                         'digits that are not ASCII (8.2.², 8.٢.2, 8.2.2 '
                         'with a full-width 2) (issue 31)', 'exit 3 naming '
                         'the sidecar, the value and the rule') as row:
            for version in ('8.2.\u00b2', '8.\u0662.2', '8.2.\uff12'):
                row.cases += 1

                def edit(doc, version=version):
                    doc['hypervisor'] = {'type': 'QEMU', 'version': version}
                err = self.cli(self.sample_host(edit), 'devices', expect=3)
                self.assertIn('sample_topology.json', err)
                self.assertIn(repr(version), err)
                self.assertIn('ASCII digits', err)
