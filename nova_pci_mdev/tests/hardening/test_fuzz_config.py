"""Fuzzing the operator-facing parsers: device spec, alias, flavor extra
specs, ``[devices]`` / ``[mdev_<type>]`` values and the nova.conf file.

Property of every test here: a hostile value ends in the parser's own
result or in a project exception whose message names the option (or extra
spec key), the offending value and a rule; nothing else escapes. The unit
suites already fuzz free text and small JSON (``tests/unit/pci``,
``tests/unit/conf``); these add structured entries with hostile values per
key, whole config files through ``conf.validate`` and the CLI.
"""

import ast
import io
import json
import os

import fixtures
from hypothesis import assume
from hypothesis import given
from hypothesis import strategies as st

from nova_pci_mdev import conf
from nova_pci_mdev import data
from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.cmd import cli
from nova_pci_mdev.cmd import common
from nova_pci_mdev.compute import flavor
from nova_pci_mdev.pci import request
from nova_pci_mdev.pci import whitelist
from nova_pci_mdev.tests.hardening import recorder
from nova_pci_mdev.tests.hardening import strategies as hs

SLOT = '6f0d6a3e-4a8a-4f4e-9e5c-3a3c0a9b1c01'


def _rec(address, vendor='10de', product='1eb8', dev_type='type-PCI',
         parent=None, mdev_type=None, **extra):
    return {'address': address, 'vendor_id': vendor, 'product_id': product,
            'dev_type': dev_type, 'parent_addr': parent,
            'mdev_type': mdev_type, 'numa_node': 0, 'label': 'l',
            'dev_id': 'x', 'extra_info': extra}


#: One device of each kind for whitelists that parse.
DEVICES = (
    _rec('0000:84:00.0', dev_type='mdev-pf', mdev_type='nvidia-35'),
    _rec(SLOT, dev_type='mdev-vf', parent='0000:84:00.0',
         mdev_type='nvidia-35'),
    _rec('0000:0a:00.0', '8086', '1572', 'type-PF'),
    _rec('0000:0a:02.1', '8086', '154c', 'type-VF', parent='0000:0a:00.0'),
    _rec('mtty', '', '', 'mdev-pf', mdev_type='mtty-1', virtual='true'),
    _rec('0000:1d:00.0', '144d', 'a808', devname='eth0'),
)

SPEC_KEYS = ('vendor_id', 'product_id', 'address', 'devname', 'mdev_type',
             'physical_network', 'trusted', 'remote_managed', 'managed',
             'dev_type', 'numa_node', 'parent_addr')
REGEX_KEYS = ('domain', 'bus', 'slot', 'function')

#: Address-like text: globs, names, UUID look-alikes, out-of-range parts.
address_text = st.one_of(
    hs.hostile_text,
    st.text(alphabet='0123456789abcdefxm:.*-_', max_size=70),
    st.from_regex(r'\A[0-9a-fA-F]{8}-[a-z0-9-]{0,60}\Z'),
    st.from_regex(r'\A[A-Za-z][A-Za-z0-9_-]{0,70}\Z'),
    st.from_regex(r'\A[0-9a-f*]{0,5}:[0-9a-f*]{0,3}:[0-9a-f*]{0,3}'
                  r'\.[0-9a-f*]{0,2}\Z'))
regex_text = st.one_of(
    hs.hostile_text,
    st.sampled_from(['.*', '(a+)+$', '[', '(?P<x>', '\\', 'a{99999999999}',
                     '(' * 120, '[0-9a-f]{2}', '0a|0b', '(?i)A', '\\Z']))
#: Per key, the values most likely to find a gap in that key's rule.
_SPEC_VALUES = {
    'vendor_id': st.one_of(hs.json_scalar, st.from_regex(
        r'\A\s*(0x)?[0-9a-fA-F\u0663\uff10]{0,6}\s*\Z')),
    'product_id': hs.json_scalar,
    'address': st.one_of(
        address_text, hs.json_scalar,
        st.dictionaries(st.sampled_from(REGEX_KEYS) | hs.hostile_text,
                        regex_text | hs.json_scalar, max_size=5)),
    'devname': st.one_of(hs.json_scalar, st.from_regex(
        r'\A[A-Za-z0-9_.:@/-]{0,70}\Z')),
    'mdev_type': st.one_of(hs.json_scalar, st.from_regex(
        r'\A[A-Za-z0-9_.:*?\[\]!/-]{0,130}\Z')),
}
#: One device-spec entry: known keys with hostile values, other keys too.
spec_entry = st.one_of(
    st.fixed_dictionaries({}, optional={
        key: _SPEC_VALUES.get(key, hs.json_scalar) for key in SPEC_KEYS}),
    st.dictionaries(st.sampled_from(SPEC_KEYS) | hs.hostile_text,
                    hs.json_value(max_leaves=4), max_size=5))
spec_option_value = st.one_of(
    spec_entry.map(hs.dumps),
    st.lists(spec_entry, max_size=3).map(hs.dumps),
    hs.json_value(SPEC_KEYS).map(hs.dumps),
    hs.hostile_text)

alias_entry = st.dictionaries(
    st.sampled_from(request.ALIAS_KEYS) | hs.hostile_text,
    st.one_of(hs.json_scalar, hs.json_value(max_leaves=3),
              st.sampled_from(['10de', '1eb8', 'mdev-vf', 'mdev-pf',
                               'type-VF', 'required', 'socket', 'vGPU',
                               'nvidia-35', 'yes', 'pci', 'CUSTOM_X'])),
    max_size=7)


def _walk(value):
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def haystack(*texts):
    """Every text form of the input and of its JSON parts, for checking
    that a message quotes the input rather than something made up."""
    parts = []
    for text in texts:
        parts.extend((str(text), repr(text)))
        try:
            parsed = json.loads(text) if isinstance(text, str) else None
        except (ValueError, RecursionError):
            parsed = None
        if parsed is not None:
            for item in _walk(parsed):
                parts.extend((str(item), repr(item)))
    return '\n'.join(parts)


def quotes_input(value, hay):
    """True when ``value`` (a message's value, maybe a truncated repr or a
    list joined by ", ") is taken from ``hay``."""
    value = str(value)
    if not value.strip():
        return True     # an empty key or value: nothing to quote
    frag = value[:-3] if value.endswith('...') else value
    candidates = {frag}
    try:
        literal = ast.literal_eval(frag)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        if literal is None or literal == '':
            return True     # the value is absent or empty: nothing to quote
        candidates.update((str(literal), repr(literal)))
    candidates.update(p.strip() for p in frag.split(','))
    return any(c and c in hay for c in candidates)


class ConfigFuzzMixin(object):

    def assertConfigProblems(self, problems, group, option, hay):
        """Each problem is a ConfigError on ``[group] option`` that quotes
        the input and states a rule."""
        self.assertTrue(problems)
        for problem in problems:
            self.assertIsInstance(problem, exception.ConfigError)
            msg = str(problem)
            if group is not None:
                self.assertTrue(msg.startswith('[%s] %s = ' % (group, option)),
                                msg)
            self.assertTrue(problem.kwargs.get('rule'), msg)
            value = problem.kwargs.get('value')
            self.assertTrue(value == '(unreadable)' or
                            quotes_input(value, hay),
                            'message does not quote the input: %s' % msg)


class DeviceSpecFuzzTest(recorder.HardeningTestCase, ConfigFuzzMixin):

    def test_device_spec_values(self):
        with self.record('fuzz', '[pci] device_spec: structured entries, '
                         'hostile value per key (Whitelist.from_config)',
                         'specs or ConfigErrors naming option, value and '
                         'rule; matching never raises') as row:

            @recorder.examples(150, 2000)
            @given(st.lists(spec_option_value, min_size=1, max_size=3))
            def check(values):
                row.cases += 1
                try:
                    wl = whitelist.Whitelist.from_config(values)
                except exception.ConfigErrors as exc:
                    self.assertConfigProblems(exc.errors, 'pci',
                                              'device_spec',
                                              haystack(*values))
                    return
                for spec in wl.specs:
                    for key in ('vendor_id', 'product_id'):
                        value = getattr(spec, key)
                        self.assertTrue(value == '*' or (
                            len(value) == 4 and value == value.lower()))
                    for key, value in spec.tags.items():
                        self.assertIsInstance(value, str)
                for dev in DEVICES:
                    wl.match(dev)
                    wl.matching(dev)
                wl.unmatched(DEVICES)

            check()

    def test_address_that_is_neither_glob_nor_name(self):
        # Regression for the fuzz finding above: a name-like address that
        # names.normalize_address refuses must be a ConfigError too.
        with self.record('fuzz', '[pci] device_spec address "deadbeef-x" / '
                         '65-letter name (regression)',
                         'ConfigErrors naming [pci] device_spec') as row:
            for address in ('deadbeef-x', 'm' * 65):
                row.cases += 1
                value = json.dumps({'address': address})
                exc = self.assertRaises(exception.ConfigErrors,
                                        whitelist.Whitelist.from_config,
                                        [value])
                self.assertIn('[pci] device_spec', str(exc.errors[0]))


class AliasFuzzTest(recorder.HardeningTestCase, ConfigFuzzMixin):

    def test_alias_values(self):
        with self.record('fuzz', '[pci] alias: structured entries, hostile '
                         'value per key (AliasTable.from_config)',
                         'aliases or ConfigErrors naming option, value and '
                         'rule') as row:

            @recorder.examples(150, 2000)
            @given(st.lists(alias_entry.map(hs.dumps) | hs.hostile_text,
                            min_size=1, max_size=3))
            def check(values):
                row.cases += 1
                try:
                    table = request.AliasTable.from_config(values)
                except exception.ConfigErrors as exc:
                    self.assertConfigProblems(
                        [p for p in exc.errors if p.severity == 'error'],
                        'pci', 'alias', haystack(*values))
                    return
                for alias in table.aliases():
                    self.assertTrue(alias.name and alias.name.strip())
                    for spec in alias.specs:
                        self.assertTrue(all(isinstance(v, str)
                                            for v in spec.values()))

            check()

    def test_alias_extra_spec_against_fuzzed_tables(self):
        with self.record('fuzz', 'flavor pci_passthrough:alias values '
                         'against configured aliases',
                         'requests or InvalidExtraSpec / InvalidAlias '
                         'naming the alias and value') as row:
            table = request.AliasTable.from_config([
                '{"name": "vGPU", "mdev_type": "nvidia-35"}',
                '{"name": "nic", "vendor_id": "8086", "product_id": "154c",'
                ' "device_type": "type-VF"}'])

            item = st.tuples(
                st.sampled_from(['vGPU', 'nic']) | hs.hostile_text,
                st.integers(-3, 10 ** 10).map(str) | hs.hostile_text)
            value = st.lists(item, min_size=1, max_size=4).map(
                lambda items: ','.join('%s:%s' % i for i in items))

            @recorder.examples(150, 2000)
            @given(hs.hostile_text | value, st.none() | hs.hostile_text)
            def check(value, policy):
                row.cases += 1
                specs = {request.ALIAS_SPEC: value}
                if policy is not None:
                    specs[request.NUMA_POLICY_SPEC] = policy
                try:
                    reqs = request.requests_from_extra_specs(specs, table)
                except exception.InvalidExtraSpec as exc:
                    self.assertIn(exc.kwargs['key'], specs)
                    self.assertIn(exc.kwargs['key'], str(exc))
                    return
                except exception.InvalidAlias as exc:
                    self.assertIn(exc.kwargs['alias'], value)
                    return
                for req in reqs:
                    self.assertIn(req.alias_name, table)
                    self.assertGreaterEqual(req.count, 1)

            check()


#: Extra-spec keys a flavor may carry, plus hostile ``resources`` keys.
FLAVOR_KEYS = st.one_of(
    st.sampled_from(['pci_passthrough:alias', 'hw:pci_numa_affinity_policy',
                     'hw:numa_nodes', 'resources:VGPU',
                     'resources1:CUSTOM_MLX5', 'resources_x:VGPU',
                     'resources:custom_x', 'resources:', 'hw:cpu_policy']),
    hs.hostile_text.map(lambda t: 'resources' + t),
    st.tuples(hs.hostile_text, hs.hostile_text).map(
        lambda t: 'resources%s:%s' % t),
    hs.hostile_text)


class FlavorFuzzTest(recorder.HardeningTestCase):

    def test_flavor_extra_specs(self):
        with self.record('fuzz', 'flavor extra specs: hw:numa_nodes, '
                         'hw:pci_numa_affinity_policy, resources[N]:<RC> '
                         '(flavor.parse)',
                         'FlavorRequest of validated values or '
                         'InvalidExtraSpec naming key, value and rule') as row:
            table = request.AliasTable.from_config(
                ['{"name": "vGPU", "mdev_type": "nvidia-35"}'])
            rc_name = flavor._RC_NAME

            @recorder.examples(150, 2000)
            @given(st.dictionaries(FLAVOR_KEYS, hs.json_scalar, max_size=5))
            def check(specs):
                row.cases += 1
                try:
                    result = flavor.parse(specs, table)
                except exception.InvalidExtraSpec as exc:
                    key = exc.kwargs['key']
                    self.assertIn(key, specs)
                    self.assertIn(key, str(exc))
                    self.assertTrue(exc.kwargs['reason'])
                    return
                except exception.InvalidAlias as exc:
                    self.assertIn(exc.kwargs['alias'],
                                  str(specs.get(request.ALIAS_SPEC)))
                    return
                if result.numa_nodes is not None:
                    self.assertIsInstance(result.numa_nodes, int)
                    self.assertGreaterEqual(result.numa_nodes, 1)
                for group in result.resource_groups.values():
                    for rc, amount in group.items():
                        self.assertTrue(rc_name.match(rc), rc)
                        self.assertNotIn('\n', rc)
                        self.assertIsInstance(amount, int)
                        self.assertGreaterEqual(amount, 1)

            check()


class CliExtraSpecFuzzTest(recorder.HardeningTestCase):
    """The whole CLI: ``claim --dry-run --extra-spec`` on the sample host."""

    def test_cli_claim_dry_run(self):
        with self.record('fuzz', 'CLI claim --dry-run --extra-spec '
                         'KEY=VALUE on the bundled host',
                         'exit 0/1/2 with a one-line message; no traceback, '
                         'nothing claimed') as row:
            state = self.useFixture(fixtures.TempDir()).path

            @recorder.examples(8, 150)
            @given(st.lists(st.one_of(
                hs.hostile_text,
                st.tuples(FLAVOR_KEYS, hs.hostile_text).map('='.join),
                st.sampled_from(['pci_passthrough:alias=vGPU:1',
                                 'resources:VGPU=1', 'hw:numa_nodes=2'])),
                min_size=1, max_size=3))
            def check(items):
                # assume(), not .filter(): a filter's retry event prints
                # the repr of the whole strategy (tens of kB, and a
                # HypothesisWarning about it).
                assume(all('\x00' not in i and '\ud800' not in i
                           and '\udfff' not in i for i in items))
                row.cases += 1
                argv = ['--state-dir', state, '--format', 'json', 'claim',
                        '--dry-run']
                for item in items:
                    argv.append('--extra-spec=' + item)
                out, err = io.StringIO(), io.StringIO()
                code = cli.main(argv, out=out, err=err)
                self.assertIn(code, (0, 1, 2), err.getvalue())
                if code:
                    self.assertTrue(err.getvalue().strip())
                self.assertNotIn('Traceback', err.getvalue())

            check()
            out = io.StringIO()
            self.assertEqual(0, cli.main(['--state-dir', state, '--format',
                                          'json', 'devices'], out=out))
            self.assertFalse([d for d in json.loads(out.getvalue())
                              if d.get('instance_uuid')])


def _conf_line(text):
    """A value as one nova.conf line (newlines would start new options)."""
    return text.replace('\n', ' ').replace('\r', ' ')


no_surrogates = hs.hostile_text.filter(
    lambda t: not any('\ud800' <= c <= '\udfff' for c in t))


class MdevGroupFuzzTest(recorder.HardeningTestCase, ConfigFuzzMixin):
    """``[devices] enabled_mdev_types`` and ``[mdev_<type>]`` values."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.FakeLogger(level=40))

    def _write(self, text, mode='w', **kwargs):
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, mode, **kwargs) as handle:
            handle.write(text)
        return path

    def test_mdev_group_values(self):
        with self.record('fuzz', '[devices] enabled_mdev_types and '
                         '[mdev_<type>] / [vgpu_<type>] device_addresses, '
                         'mdev_class, max_instances (conf.validate)',
                         'Settings of validated values or problems naming '
                         'group, option, value and rule') as row:

            @recorder.examples(50, 2000)
            @given(st.fixed_dictionaries({
                'types': st.lists(no_surrogates | st.sampled_from(
                    ['nvidia-35', 'mlx5_core-local', 'mtty-1']),
                    max_size=3).map(','.join),
                'addrs': st.lists(no_surrogates | st.sampled_from(
                    ['0000:84:00.0', 'mtty', '0000:84:00.0']),
                    max_size=3).map(','.join),
                'cls': no_surrogates, 'max': no_surrogates,
                'old': st.booleans()}))
            def check(v):
                row.cases += 1
                prefix = 'vgpu_' if v['old'] else 'mdev_'
                text = ('[devices]\nenabled_mdev_types = nvidia-35,%s\n'
                        '[%snvidia-35]\ndevice_addresses = %s\n'
                        'mdev_class = %s\nmax_instances = %s\n' % (
                            _conf_line(v['types']), prefix,
                            _conf_line(v['addrs']), _conf_line(v['cls']),
                            _conf_line(v['max'])))
                try:
                    cfg = conf.new_config([self._write(text)])
                except exception.ConfigErrors as exc:
                    self.assertConfigProblems(exc.errors, None, None, text)
                    return
                problems = conf.validate(cfg)
                errors = [p for p in problems if p.severity == 'error']
                if errors:
                    self.assertConfigProblems(errors, None, None, text)
                    for p in errors:
                        self.assertIn('[%s] %s' % (p.kwargs['group'],
                                                   p.kwargs['option']),
                                      str(p))
                    return
                settings = conf.load_settings(cfg)
                for options in settings.mdev_types.values():
                    names.validate_mdev_type(options.mdev_type)
                    self.assertRegex(options.resource_class,
                                     r'^(VGPU|CUSTOM_[A-Z0-9_]+)\Z')
                    for address in options.device_addresses:
                        self.assertEqual(address,
                                         names.normalize_address(address))
                    self.assertTrue(options.max_instances is None or
                                    options.max_instances >= 1)

            check()

    def test_max_instances_value_quoted_once(self):
        # Regression for the fuzz finding above: the value is taken from
        # oslo.config's message (already a repr) and repr'd again, so a
        # control character shows as '\\x1b' instead of '\x1b'.
        with self.record('fuzz', '[mdev_<type>] max_instances with a '
                         'control character (regression)',
                         'the message quotes the value as written') as row:
            row.cases += 1
            path = self._write('[devices]\nenabled_mdev_types = t1\n'
                               '[mdev_t1]\nmax_instances = a\x1bb\n')
            problems = conf.validate(conf.new_config([path]))
            self.assertEqual(["[mdev_t1] max_instances = 'a\\x1bb': "
                              'expected a positive integer'],
                             [str(p) for p in problems])

    def test_config_file_bytes(self):
        with self.record('fuzz', 'nova.conf files of arbitrary bytes '
                         '(conf.new_config + conf.validate)',
                         'ConfigErrors naming the file, or problems; no '
                         'other exception') as row:

            @recorder.examples(60, 1500)
            @given(st.binary(max_size=200).map(
                lambda b: b'[pci]\nalias = ' + b))
            def check(content):
                row.cases += 1
                path = self._write(content, mode='wb')
                try:
                    cfg = conf.new_config([path])
                except exception.ConfigErrors as exc:
                    # Every problem of an unreadable file names it.
                    for problem in exc.errors:
                        self.assertIn(path, str(problem))
                    return
                for problem in conf.validate(cfg):
                    self.assertIsInstance(problem, exception.ConfigError)

            check()

    def test_nova_conf_not_utf8(self):
        with self.record('fuzz', 'nova.conf that is not UTF-8 (regression)',
                         'ConfigErrors naming the file; CLI exit 2') as row:
            row.cases += 1
            path = self._write(b'[pci]\nalias = \xff\xfe\n', mode='wb')
            exc = self.assertRaises(exception.ConfigErrors,
                                    conf.new_config, [path])
            self.assertIn(path, str(exc))
            err = io.StringIO()
            code = cli.main(['--config-file', path, '--state-dir',
                             os.path.join(self.tmp, 'state'), 'check-config'],
                            out=io.StringIO(), err=err)
            self.assertEqual(common.EXIT_INVALID, code)


class SampleConfigStillCleanTest(recorder.HardeningTestCase):
    """Guard for the fuzz tests' premise: the bundled config is valid."""

    def test_bundled_config_is_clean(self):
        with self.record('fuzz', 'bundled nova.conf (control case)',
                         'no problem') as row:
            row.cases += 1
            cfg = conf.new_config([data.SAMPLE_NOVA_CONF])
            self.assertEqual([], [p for p in conf.validate(cfg)
                                  if p.severity == 'error'])
