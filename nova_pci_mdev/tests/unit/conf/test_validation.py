"""Whole-configuration validation: every problem in one run."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_pci_mdev import conf
from nova_pci_mdev import exception
from nova_pci_mdev.pci import request
from nova_pci_mdev.tests.unit.conf import base

GOOD = """
[pci]
device_spec = {"vendor_id": "10de"}
alias = {"vendor_id": "10de", "mdev_type": "nvidia-35", "name": "vGPU"}
[devices]
enabled_mdev_types = nvidia-35
"""

FIVE_MISTAKES = """
[pci]
device_spec = {"vendor_id": "10de"
alias = {"vendor_id": "10de", "mdev_type": "nvidia-35", "name": "vGPU",
         "numa_policy": "strict"}
[devices]
enabled_mdev_types = nvidia-35, nvidia-36
[mdev_nvidia-35]
device_addresses = 0000:84:00.0
mdev_class = mlx-5
[mdev_nvidia-36]
device_addresses = 0000:84:00.0
max_instances = 0
"""


class ValidateTest(base.ConfTestCase):

    def test_good_config(self):
        c = self.load(GOOD)
        self.assertEqual([], conf.validate(c))
        settings = conf.load_settings(c)
        self.assertEqual(1, len(settings.whitelist.specs))
        self.assertEqual(('vGPU',), settings.aliases.names())
        self.assertEqual((), settings.warnings)

    def test_five_mistakes_five_errors(self):
        problems = self.problems(FIVE_MISTAKES)
        self.assertEqual(5, len(problems), '\n'.join(map(str, problems)))
        for p in problems:
            self.assertIsInstance(p, exception.ConfigError)
            self.assertEqual('error', p.severity)
        self.assertEqual(
            [('pci', 'device_spec'), ('pci', 'alias'),
             ('mdev_nvidia-35', 'mdev_class'),
             ('mdev_nvidia-36', 'device_addresses'),
             ('mdev_nvidia-36', 'max_instances')],
            [(p.kwargs['group'], p.kwargs['option']) for p in problems])
        exc = self.assertRaises(exception.ConfigErrors, conf.load_settings,
                                self.load(FIVE_MISTAKES))
        self.assertEqual(5, len(exc.errors))
        self.assertIn('5 configuration problem(s)', str(exc))

    def test_each_kind_of_mistake(self):
        cases = [
            # (config text, group, option, words)
            ('[pci]\ndevice_spec = {"vendor_id": "10dex"}\n',
             'pci', 'device_spec', '1 to 4 hex digits'),
            ('[pci]\ndevice_spec = {"address": "0000:0a:00.0", '
             '"devname": "eth0"}\n', 'pci', 'device_spec',
             'devname and address'),
            ('[pci]\ndevice_spec = {"address": {"bus": "(("}}\n',
             'pci', 'device_spec', 'not a valid regex'),
            ('[pci]\ndevice_spec = {"mdev_type": "../../x"}\n',
             'pci', 'device_spec', 'mdev_type'),
            ('[pci]\nalias = {"vendor_id": "10de", "product_id": "1eb8"}\n',
             'pci', 'alias', 'non-empty name'),
            ('[pci]\nalias = {"name": "a", "mdev_type": "t", "colour": 1}\n',
             'pci', 'alias', 'unknown key'),
            ('[pci]\nalias = {"name": "a", "mdev_type": "t", '
             '"device_type": "type-X"}\n', 'pci', 'alias', 'device_type'),
            ('[pci]\nalias = {"name": "a", "vendor_id": "8086", '
             '"product_id": "0443"}\nalias = {"name": "a", "vendor_id": '
             '"8086", "product_id": "0444", "numa_policy": "required"}\n',
             'pci', 'alias', 'must agree'),
            ('[devices]\nenabled_mdev_types = nvidia-35,../x\n',
             'devices', 'enabled_mdev_types', "'../x'"),
            ('[devices]\nenabled_mdev_types = a/b\n',
             'devices', 'enabled_mdev_types', "'a/b'"),
            ('[devices]\nenabled_mdev_types = a,,b\n',
             'devices', 'enabled_mdev_types', 'empty item'),
            ('[devices]\nenabled_mdev_types = t\n[mdev_t]\n'
             'device_addresses = ../sys\n',
             'mdev_t', 'device_addresses', "'../sys'"),
            # oslo.config substitutes $name when reading an option
            ('[pci]\nalias = {"name": "$foo", "mdev_type": "t"}\n',
             'pci', 'alias', 'write "$$" for a literal "$"'),
            ('[devices]\nenabled_mdev_types = $nope\n',
             'devices', 'enabled_mdev_types', 'no such option nope'),
            ('[devices]\nenabled_mdev_types = t\n[mdev_t]\n'
             'mdev_class = $x\n', 'mdev_t', 'mdev_class', '$$'),
        ]
        for text, group, option, words in cases:
            problems = self.errors(text)
            self.assertEqual(1, len(problems), (text, problems))
            p = problems[0]
            self.assertEqual((group, option),
                             (p.kwargs['group'], p.kwargs['option']), text)
            self.assertIn(words, str(p), text)

    def test_warnings(self):
        cases = [
            ('[devices]\nenabled_mdev_types = t1\n[mdev_t2]\n'
             'device_addresses = 0000:84:00.0\n', 'mdev_t2',
             'not in [devices] enabled_mdev_types'),
            ('[vgpu_t2]\ndevice_addresses = 0000:84:00.0\n', 'vgpu_t2',
             'the group is ignored'),
            ('[devices]\nenabled_mdev_types = t1, t1\n', 'devices',
             'listed twice'),
            ('[pci]\nalias = {"name": "g", "mdev_type": "nvidia-99"}\n'
             '[devices]\nenabled_mdev_types = nvidia-35\n', 'pci',
             'not in [devices] enabled_mdev_types'),
            ('[pci]\ndevice_spec = {"mdev_type": "nvidia-9*"}\n'
             '[devices]\nenabled_mdev_types = nvidia-35\n', 'pci',
             'matches no type'),
            ('[pci]\nalias = {"name": "a", "vendor_id": "8086"}\n', 'pci',
             'every whitelisted device of vendor_id 8086'),
        ]
        for text, group, words in cases:
            c = self.load(text)
            problems = conf.validate(c)
            self.assertEqual(['warning'], [p.severity for p in problems],
                             (text, problems))
            self.assertEqual(group, problems[0].kwargs['group'])
            self.assertIn(words, str(problems[0]))
            settings = conf.load_settings(c)   # warnings do not stop it
            self.assertEqual([str(p) for p in problems],
                             [str(w) for w in settings.warnings])

    def test_dollar_dollar_is_a_literal_dollar(self):
        c = self.load('[pci]\nalias = {"name": "a$$b", "mdev_type": "t"}\n'
                      '[devices]\nenabled_mdev_types = t\n')
        self.assertEqual(('a$b',), conf.load_settings(c).aliases.names())

    def test_seed_story_through_settings(self):
        settings = conf.load_settings(self.load(GOOD))
        req, = request.requests_from_extra_specs(
            {'pci_passthrough:alias': 'vGPU:1'}, settings.aliases)
        self.assertEqual([{'vendor_id': '10de', 'mdev_type': 'nvidia-35'}],
                         req.spec)
        slot = {'address': '6f0d6a3e-4a8a-4f4e-9e5c-3a3c0a9b1c01',
                'vendor_id': '10de', 'product_id': '1eb8',
                'dev_type': 'mdev-vf', 'parent_addr': '0000:84:00.0',
                'mdev_type': 'nvidia-35'}
        self.assertIsNotNone(settings.whitelist.match(slot))

    def test_glob_spec_matching_an_enabled_type_is_fine(self):
        self.assertEqual([], self.problems(
            '[pci]\ndevice_spec = {"mdev_type": "nvidia-3*"}\n'
            '[devices]\nenabled_mdev_types = nvidia-35\n'))

    def test_validate_registers_dynamic_groups_of_a_bare_config(self):
        from oslo_config import cfg
        c = cfg.ConfigOpts()
        conf.register_opts(c)
        c(args=[], default_config_files=[self.write(
            '[devices]\nenabled_mdev_types = t1\n[mdev_t1]\n'
            'mdev_class = bad-class\n')])
        problems = conf.validate(c)
        self.assertEqual(['mdev_class'],
                         [p.kwargs['option'] for p in problems])


_LINE = st.text(st.characters(blacklist_categories=('Cs', 'Cc')),
                max_size=30).map(str.strip) | st.sampled_from(
    ['$x', '$$', '${y', '{"name": "$z"}', '0', '-1', 'a,,b', '../x',
     '{"vendor_id": "10de"}', '{"name": "a", "mdev_type": "t1"}'])


class RobustnessTest(base.ConfTestCase):

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.fixed_dictionaries({
        'spec': _LINE, 'alias': _LINE, 'types': _LINE, 'cls': _LINE,
        'max': _LINE, 'addr': _LINE}))
    def test_arbitrary_values_give_problems_not_crashes(self, v):
        text = ('[pci]\ndevice_spec = %(spec)s\nalias = %(alias)s\n'
                '[devices]\nenabled_mdev_types = t1,%(types)s\n'
                '[mdev_t1]\nmdev_class = %(cls)s\nmax_instances = %(max)s\n'
                'device_addresses = %(addr)s\n' % v)
        try:
            c = self.load(text)
        except exception.ConfigErrors:
            return   # a file oslo.config cannot parse
        for problem in conf.validate(c):
            self.assertIsInstance(problem, exception.ConfigError)
