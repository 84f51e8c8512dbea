"""Creatable capacity never costs beyond a bound (issue 15, item 1).

A parent that reports ``availableInstances`` of 10**9 or 2**31 once made
``devices``, ``check-config`` and ``claim`` hang (one slot record per
creatable instance: 100,000 slots took 2m42s and 500 MB). Slots still to
create are now counted on their parent and made only when claimed: the
number of tracked devices and stored rows is the same whatever the count,
and the count itself still reaches the pools and the Placement inventory
(capped at Placement's 2**31 - 1).

The hosts are copies of the bundled sample host (host XML and sidecar)
with one GPU's and the mlx5 parent's counts raised; every command runs
through ``cli.main`` in this process.
"""

import io
import json
import os
import re
import shutil
import sqlite3

import fixtures

from nova_pci_mdev import data
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.hardening import recorder

#: (parent, exposed type, its count in the sample host's XML): the first
#: type block of that name in the file is this parent's.
GPU = ('0000:3b:00.0', 'nvidia-223', 8)
MLX5 = ('0000:5e:00.0', 'mlx5_core-local', 16)
MAX_INT = 2 ** 31 - 1


class CapacityTest(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def host(self, count):
        """A copy of the sample host whose GPU and mlx5 parents can create
        ``count`` more mdevs each; returns its connection URI."""
        with open(data.SAMPLE_HOST_XML) as handle:
            xml = handle.read()
        for _parent, mdev_type, written in (GPU, MLX5):
            xml, found = re.subn(
                r"(<type id='%s'>.*?<availableInstances>)%d<" % (
                    re.escape(mdev_type), written),
                r'\g<1>%d<' % count, xml, count=1, flags=re.S)
            self.assertEqual(1, found)
        path = os.path.join(self.tmp, 'host-%d.xml' % count)
        with open(path, 'w') as handle:
            handle.write(xml)
        shutil.copy(data.SAMPLE_HOST_TOPOLOGY,
                    path[:-len('.xml')] + '_topology.json')
        return 'test://' + path

    def nova_conf(self):
        """The sample nova.conf without its mlx5 max_instances cap."""
        with open(data.SAMPLE_NOVA_CONF) as handle:
            text = handle.read()
        self.assertEqual(1, text.count('max_instances = 8\n'))
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(text.replace('max_instances = 8\n', ''))
        return path

    def cli(self, uri, *argv):
        out, err = io.StringIO(), io.StringIO()
        state = os.path.join(self.tmp, 'state-' + os.path.basename(uri))
        code = cli.main(['--connection', uri, '--state-dir', state,
                         '--config-file', self.conf, '--format', 'json']
                        + list(argv), out=out, err=err)
        self.assertEqual(0, code, err.getvalue())
        return out.getvalue(), state

    def test_huge_available_instances(self):
        with self.record('capacity', 'availableInstances of 100,000, 10**9 '
                         'and 2**31 on two parents: devices, pools, '
                         'inventory, check-config, claim', 'every command '
                         'answers with as many devices and stored rows as '
                         'with the sample host\'s 8 and 16; pools and '
                         'inventory carry the count (capped at 2**31 - 1, '
                         'what Placement and Nova\'s fields hold, with a '
                         'warning); a claim makes one slot') as row:
            self.conf = self.nova_conf()
            shape = None
            for count in (16, 100000, 10 ** 9, 2 ** 31):
                row.cases += 1
                uri = self.host(count)
                out, state = self.cli(uri, 'devices')
                devices = json.loads(out)
                self.cli(uri, 'check-config')
                pools = json.loads(self.cli(uri, 'pools')[0])
                tree = json.loads(self.cli(uri, 'inventory')[0])
                claim = json.loads(self.cli(
                    uri, 'claim', '--extra-spec',
                    'pci_passthrough:alias=nvidia-223:1,mlx5:1')[0])
                rows = _rows(os.path.join(state, 'state.db'))
                here = (len(devices), rows)
                shape = shape or here
                # One more row per claimed slot, nothing per creatable one.
                self.assertEqual(shape, here, 'availableInstances %d'
                                 % count)
                self.assertEqual(2, len(claim['created_mdevs']))
                free = {p['mdev_type']: p['count'] for p in pools}
                totals = {c['device_address']: sum(
                    i['total'] for i in c['inventories'].values())
                    for c in tree['children']}
                for parent, mdev_type, _written in (GPU, MLX5):
                    self.assertEqual(min(count, MAX_INT), free[mdev_type])
                    self.assertEqual(min(count, MAX_INT), totals[parent])


def _rows(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute('SELECT COUNT(*) FROM devices').fetchone()[0]
    finally:
        conn.close()
