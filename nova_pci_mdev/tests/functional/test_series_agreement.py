"""The library and the Nova patch series agree on the bundled L40S host.

One configuration, valid for both (the GPU opted in by a device spec
naming its type, 12 vGPUs at most: NVIDIA's count of L40S-4Q)::

    [pci] device_spec = {"vendor_id": "10de", "product_id": "26b9",
                         "mdev_type": "nvidia-1150", "max_instances": 12}
    [devices] enabled_mdev_types = nvidia-1150

The library runs in process (its CLI on ``l40s_host.xml`` through the real
libvirt test driver, with its emulated NVIDIA driver on ``l40s_sysfs``);
the series runs in a Nova tree that has it applied, with Nova's Python
(``tools/series_vgpu_vf_probe.py``, Nova's fake libvirt fed with the same
host XML, the same sysfs tree). Both must report the same VFs as vGPUs of
nvidia-1150, write the same types for an instance claiming two of them,
and, on the tree the library left after that claim, report the same VFs
again.

Opt-in: set ``NOVA_SERIES_TREE`` to such a Nova tree (with
``nova/virt/libvirt/vgpu_vf.py``) and, unless it is
``~/.cache/nova-pci-mdev/check-patches/venv/bin/python``,
``NOVA_SERIES_PYTHON`` to its virtualenv's Python. Skipped otherwise (each
series run takes about a minute). ``tools/check-patches`` runs it on its
final state, with both set to its tree and virtualenv, and fails on a skip.
"""

import io
import json
import os
import shutil
import subprocess
import tempfile

import testtools

from nova_pci_mdev.cmd import cli
from nova_pci_mdev import data

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'tools')
DEFAULT_PYTHON = os.path.expanduser(
    '~/.cache/nova-pci-mdev/check-patches/venv/bin/python')

MDEV_TYPE = 'nvidia-1150'
DEVICE_SPEC = [{'vendor_id': '10de', 'product_id': '26b9',
                'mdev_type': MDEV_TYPE, 'max_instances': 12}]
CONF = '''[pci]
device_spec = %s
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "%s", \
"numa_policy": "required"}

[devices]
enabled_mdev_types = %s
''' % (json.dumps(DEVICE_SPEC[0]), MDEV_TYPE, MDEV_TYPE)
INSTANCE = '5e1e5a3c-8d8b-4b7e-9d59-3a4b1c2d0e7f'
SERIES_ENV = {
    'PBR_VERSION': '34.0.0', 'LC_ALL': 'C.UTF-8',
    'OS_NOVA_DISABLE_EVENTLET_PATCHING': 'False',
    'OS_STDOUT_CAPTURE': '1', 'OS_STDERR_CAPTURE': '1',
}


def _series():
    tree = os.environ.get('NOVA_SERIES_TREE')
    python = os.environ.get('NOVA_SERIES_PYTHON', DEFAULT_PYTHON)
    if not tree or not os.path.exists(
            os.path.join(tree, 'nova', 'virt', 'libvirt', 'vgpu_vf.py')):
        return None
    if not os.path.exists(python):
        return None
    return tree, python


def _currents(devices_dir):
    out = {}
    for address in sorted(os.listdir(devices_dir)):
        path = os.path.join(devices_dir, address, 'nvidia',
                            'current_vgpu_type')
        if os.path.exists(path):
            with open(path) as f:
                out[address] = int(f.read().strip())
    return out


@testtools.skipUnless(_series(), 'NOVA_SERIES_TREE (a Nova tree with the '
                      'series applied) and its Python are needed')
class L40SAgreementTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tree, self.python = _series()
        self.tmp = tempfile.mkdtemp(prefix='series-agreement-')
        self.addCleanup(shutil.rmtree, self.tmp)
        self.conf = os.path.join(self.tmp, 'nova.conf')
        with open(self.conf, 'w') as f:
            f.write(CONF)
        self.state = os.path.join(self.tmp, 'state')

    def _library(self, *argv):
        out = io.StringIO()
        code = cli.main([
            '--config-file', self.conf,
            '--connection', data.l40s_connection_uri(),
            '--state-dir', self.state, '--format', 'json'] + list(argv),
            out=out, err=io.StringIO())
        self.assertEqual(0, code, out.getvalue())
        return json.loads(out.getvalue())

    @staticmethod
    def _vgpu_vfs(devices):
        """{address: mdev_type} of the VFs the library offers as vGPUs."""
        return {
            dev['address']: dev['mdev_type'] for dev in devices
            if dev['dev_type'] == 'type-VF' and dev.get('mdev_type') and
            (dev.get('extra_info') or {}).get('mdev_exposed') == 'true'}

    def _series_probe(self, devices_dir, claim):
        """Runs the series' driver on a copy of devices_dir."""
        work = tempfile.mkdtemp(dir=self.tmp)
        sysfs = os.path.join(work, 'devices')
        shutil.copytree(devices_dir, sysfs)
        probe = {
            'host_xml': data.L40S_HOST_XML, 'sysfs_devices': sysfs,
            'device_spec': DEVICE_SPEC, 'enabled_mdev_types': [MDEV_TYPE],
            'claim': claim, 'mdev_type': MDEV_TYPE,
            'output': os.path.join(work, 'out.json')}
        with open(os.path.join(work, 'in.json'), 'w') as f:
            json.dump(probe, f)
        env = dict(os.environ, SERIES_PROBE_INPUT=os.path.join(
            work, 'in.json'), PYTHONPATH=TOOLS, **SERIES_ENV)
        result = subprocess.run(
            [self.python, '-m', 'testtools.run', 'series_vgpu_vf_probe'],
            cwd=self.tree, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=600)
        self.assertEqual(0, result.returncode, result.stdout[-4000:])
        with open(probe['output']) as f:
            return json.load(f)

    def test_same_vfs_claimable_and_same_types_written(self):
        pristine = os.path.join(data.L40S_SYSFS, 'sys', 'bus', 'pci',
                                'devices')
        offered = self._vgpu_vfs(self._library('devices'))
        self.assertEqual(12, len(offered))

        claim = self._library(
            'claim', '--extra-spec', 'pci_passthrough:alias=vGPU:2',
            '--extra-spec', 'hw:numa_nodes=1', '--instance', INSTANCE)
        claimed = sorted(dev['address'] for dev in claim['devices'])
        self.assertEqual(2, len(claimed))
        library_tree = os.path.join(self.state, 'nvidia-sysfs', 'sys',
                                    'bus', 'pci', 'devices')

        series = self._series_probe(pristine, claimed)
        # the same VFs are vGPUs of nvidia-1150
        self.assertEqual(offered, series['slots'])
        # the same types are written for the same claim
        self.assertEqual(claimed, sorted(series['written']))
        self.assertEqual(
            {address: 1150 if address in claimed else 0
             for address in series['current']},
            series['current'])
        self.assertEqual(_currents(library_tree), series['current'])

        # on the tree the library's claim left, the same VFs again
        after = self._vgpu_vfs(self._library('devices'))
        series = self._series_probe(library_tree, [])
        self.assertEqual(after, series['slots'])
        self.assertEqual([], series['written'])
