"""Never a wrong answer with exit 0 (issue 31).

Each of these once answered exit 0 with something other than what was
asked: a claim that got fewer devices than asked, ``restore`` taking an
mdev that came back under another GPU as the instance's, ``trait:`` specs
ignored, ``device_spec = null`` taken for no spec, ``--instance ''``
claimed under a random UUID, a move source listing a device twice.
Stories run ``cli.main`` in this process on the bundled sample host or a
host file written here; the properties reuse the unit and functional
tests' generators with the hardening scale.
"""

import io
import json
import os

import fixtures
import hypothesis
from hypothesis import strategies as st

from nova_pci_mdev.cmd import cli
from nova_pci_mdev.tests.fixtures import claim_counts as counts
from nova_pci_mdev.tests.fixtures import placement as placement_fixture
from nova_pci_mdev.tests.fixtures import placement_traits as traits
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.unit.virt.libvirt import nodedev_xml as X

INSTANCE = '7e1a0b2c-0d3f-4a5b-8c6d-9e0f1a2b3c4d'
GPU_A, GPU_B = '0000:3b:00.0', '0000:d8:00.0'     # sample host: NUMA 0, 1
#: Both GPUs of the sample host expose nvidia-222.
SAME_TYPE_CONF = """
[pci]
device_spec = {"vendor_id": "10de", "product_id": "1eb8"}
alias = {"name": "vGPU", "vendor_id": "10de", "mdev_type": "nvidia-222"}
[devices]
enabled_mdev_types = nvidia-222
"""
PF = '0000:41:00.0'
WHOLE_CONF = """
[pci]
device_spec = {"vendor_id": "10de"}
alias = {"name": "whole", "device_type": "mdev-pf", "vendor_id": "10de"}
[devices]
enabled_mdev_types = nvidia-500, nvidia-501
"""


def pf_with_mdev_vfs():
    """A PF with mdev_types whose four VFs have mdev_types too."""
    vfs = ['0000:41:00.%d' % i for i in range(1, 5)]
    devices = [X.pci(PF, vendor='10de', product='2236', numa=0, extra=(
        "<capability type='virt_functions' maxCount='8'>%s</capability>%s"
        % (''.join(X.address_attrs(v) for v in vfs),
           X.mdev_types(('nvidia-500', None, 4)))))]
    for vf in vfs:
        devices.append(X.pci(
            vf, vendor='10de', product='2237', numa=0,
            parent=X.node_name(PF),
            extra="<capability type='phys_function'>%s</capability>%s" % (
                X.address_attrs(PF), X.mdev_types(('nvidia-501', None, 1)))))
    return X.host(*devices)


class _Cli(recorder.HardeningTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.state = os.path.join(self.tmp, 'state')

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def cli(self, *argv, expect=0, state=None):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(['--state-dir', state or self.state] + list(argv),
                        out=out, err=err)
        text = out.getvalue() + err.getvalue()
        self.assertNotIn('Traceback', text)
        self.assertEqual(expect, code, ' '.join(argv) + ': ' + text)
        return out.getvalue(), err.getvalue()

    def json(self, *argv, **kwargs):
        return json.loads(self.cli('--format', 'json', *argv,
                                   **kwargs)[0])


class ClaimCountTest(_Cli):

    def test_all_of_the_request_or_nothing(self):
        with self.record('tracker', 'claims on random three-level forests '
                         '(PF and VF parents both mdev parents, slots, plain '
                         'VFs, some held), one or two requests of 1-5, ORed '
                         'aliases; and alias device_type=mdev-pf :2-:5 on '
                         "the issue's PF with four mdev-capable VFs "
                         '(issue 31)', 'exactly the count of every request, '
                         'or exit 1 naming how many fit together and '
                         'nothing claimed; a single request refused only '
                         'when fewer fit together') as row:
            host = 'test://' + self.write('pf.xml', pf_with_mdev_vfs())
            conf = self.write('whole.conf', WHOLE_CONF)
            for count in (2, 3, 4, 5):
                row.cases += 1
                state = os.path.join(self.tmp, 'whole-%d' % count)
                argv = ('--connection', host, '--config-file', conf)
                if count < 5:
                    done = self.json(*argv, 'claim', '--extra-spec',
                                     'pci_passthrough:alias=whole:%d' % count,
                                     state=state)
                    self.assertEqual(count, len(done['devices']))
                    continue
                _out, err = self.cli(*argv, 'claim', '--extra-spec',
                                     'pci_passthrough:alias=whole:5',
                                     expect=1, state=state)
                self.assertIn('5 requested (only 4 can be taken together',
                              err)
                self.assertEqual([], [d for d in self.json(
                    *argv, 'devices', state=state) if d['instance_uuid']])

            @recorder.examples(150, 1500)
            @hypothesis.given(st.data())
            def claims(data):
                row.cases += 1
                counts.check_claim(data)

            claims()


class RestoreTest(_Cli):

    def moved(self, change):
        """A vGPU claimed on GPU_A, then its mdev changed by ``change``
        (a function of the mdevs.json entry): what restore and devices
        say, and what the devices then are."""
        state = os.path.join(self.tmp, 'state-%d' % len(os.listdir(self.tmp)))
        conf = self.write('same.conf', SAME_TYPE_CONF)
        done = self.json('--config-file', conf, 'claim', '--instance',
                         INSTANCE, '--extra-spec',
                         'pci_passthrough:alias=vGPU:1', state=state)
        (slot,) = done['devices']
        self.assertEqual(GPU_A, slot['parent_addr'])
        path = os.path.join(state, 'mdevs.json')
        with open(path) as handle:
            doc = json.load(handle)
        change(doc['mdevs'][slot['address']])
        with open(path, 'w') as handle:
            json.dump(doc, handle)
        out, err = self.cli('--config-file', conf, 'restore', expect=3,
                            state=state)
        shown, _err = self.cli('--config-file', conf, 'devices',
                               state=state)
        devices = {d['address']: d for d in self.json(
            '--config-file', conf, 'devices', state=state)}
        with open(path) as handle:
            after = json.load(handle)
        return slot, out, shown, devices, doc, after

    def test_an_allocation_never_moves(self):
        with self.record('lifecycle', 'an allocated mdev back after a '
                         'reboot under another parent (another GPU and '
                         'NUMA node, same type) or with another type '
                         '(issue 31)', 'restore exits 3 saying where it '
                         'came back, devices names both parents; the '
                         'allocation stays on its parent, nothing created '
                         'or moved on the host') as row:
            for change, where in (
                    (lambda m: m.update(parent=GPU_B),
                     'came back on parent %s with type nvidia-222, not on '
                     'its parent %s' % (GPU_B, GPU_A)),
                    (lambda m: m.update(mdev_type='nvidia-224'),
                     'came back on parent %s with type nvidia-224, not on '
                     'its parent %s with type nvidia-222' % (GPU_A, GPU_A))):
                row.cases += 1
                slot, out, shown, devices, doc, after = self.moved(change)
                self.assertIn('could not restore %s' % slot['address'], out)
                self.assertIn(where, out)
                self.assertIn('mdev %s of instance %s came back on parent'
                              % (slot['address'], INSTANCE), shown)
                self.assertIn('not on its parent %s nvidia-222 (NUMA node '
                              '0): not moved' % GPU_A, shown)
                held = devices[slot['address']]
                self.assertEqual(
                    (GPU_A, 0, 'nvidia-222', 'allocated', INSTANCE),
                    (held['parent_addr'], held['numa_node'],
                     held['mdev_type'], held['status'],
                     held['instance_uuid']))
                self.assertEqual(doc, after)        # the host unchanged


class TraitsTest(_Cli):

    def test_traits_as_placement_would(self):
        with self.record('capacity', 'resources: claims with trait[N]: '
                         'required / forbidden on random provider trees '
                         'and flavors, compared with a real Placement; '
                         'trait values other than required and forbidden '
                         '(issue 31)', 'the local choice exists exactly '
                         'when Placement has a candidate and is one of '
                         'them; on the sample host the provider with the '
                         'type; other values exit 2 naming key, value and '
                         'rule') as row:
            for spec, parent in (
                    ('trait:CUSTOM_MDEV_TYPE_NVIDIA_222=required', GPU_B),
                    ('trait:CUSTOM_MDEV_TYPE_NVIDIA_223=forbidden', GPU_B),
                    ('trait:CUSTOM_MDEV_TYPE_NVIDIA_223=required', GPU_A)):
                row.cases += 1
                done = self.json('claim', '--dry-run', '--extra-spec',
                                 'resources:VGPU=1', '--extra-spec', spec)
                self.assertEqual([parent], [d['parent_addr']
                                            for d in done['devices']])
            for spec in ('trait:CUSTOM_MDEV_TYPE_NVIDIA_222=maybe',
                         'trait:CUSTOM_X=Required', 'trait:lower=required',
                         'trait1:CUSTOM_X=required'):
                row.cases += 1
                _out, err = self.cli('claim', '--extra-spec',
                                     'resources:VGPU=1', '--extra-spec',
                                     spec, expect=2)
                self.assertIn(spec.split('=')[0], err)
            fixture = self.useFixture(placement_fixture.PlacementFixture())
            traits.known_traits(fixture)

            @recorder.examples(25, 150)
            @hypothesis.given(traits.parents(), traits.flavors())
            def compared(drawn, wanted):
                row.cases += 1
                traits.check(fixture.client, drawn, wanted)

            compared()


class BadInputTest(_Cli):

    def test_json_that_is_not_an_object(self):
        values = ('null', '1', 'true', '2.5', '[null]', '[1]')
        with self.record('config', '[pci] device_spec / alias that are JSON '
                         'but no object (or list of objects): %s (issue 31)'
                         % ', '.join(values), 'check-config and every '
                         'command exit 2 naming option, entry, value and '
                         'rule, as Nova refuses them; never "configuration '
                         'OK"') as row:
            for option, rule in (('device_spec', 'expected a JSON object'),
                                 ('alias', 'expected a JSON object')):
                for value in values:
                    row.cases += 1
                    conf = self.write('bad.conf', '[pci]\n%s = %s\n'
                                      % (option, value))
                    for command in ('check-config', 'devices'):
                        out, err = self.cli('--config-file', conf, command,
                                            expect=2)
                        self.assertNotIn('configuration OK', out)
                        self.assertIn('[pci] %s = ' % option, out + err)
                        self.assertIn(rule, out + err)
            self.assertFalse(os.path.exists(self.state))

    def test_instance_that_is_not_a_uuid(self):
        with self.record('exits', "--instance '' or not a UUID on claim, "
                         'release and live-move-source (issue 31)', 'exit 2 '
                         'naming --instance, the value and the rule; '
                         'nothing claimed, no state directory made') as row:
            for argv in (('claim', '--extra-spec',
                          'pci_passthrough:alias=vGPU:1'), ('release',),
                         ('live-move-source',)):
                for value in ('', ' ', 'not-a-uuid', INSTANCE + 'x'):
                    row.cases += 1
                    _out, err = self.cli(*argv, '--instance', value,
                                         expect=2)
                    self.assertIn('Invalid --instance %r: expected a UUID'
                                  % value, err)
            self.assertFalse(os.path.exists(self.state))

    def test_move_source_listing_a_device_twice(self):
        with self.record('exits', 'live-move-check --source listing one '
                         'device twice, as written or in another case '
                         '(issue 31)', 'exit 2 naming devices[1].address, '
                         'the device and its first listing; the '
                         'destination unchanged') as row:
            source = os.path.join(self.tmp, 'source')
            self.cli('claim', '--instance', INSTANCE, '--extra-spec',
                     'pci_passthrough:alias=vGPU:1', state=source)
            doc = self.json('live-move-source', '--instance', INSTANCE,
                            state=source)
            (dev,) = doc['devices']
            before = self.json('devices')
            for twice in (dev, dict(dev, address=dev['address'].upper())):
                row.cases += 1
                path = self.write('move.json', json.dumps(
                    dict(doc, host='compute-a', devices=[dev, twice])))
                _out, err = self.cli('live-move-check', '--source', path,
                                     '--extra-spec',
                                     'pci_passthrough:alias=vGPU:2',
                                     expect=2)
                self.assertIn('devices[1].address %r: also devices[0]'
                              % twice['address'].lower(), err)
                self.assertEqual(before, self.json('devices'))
