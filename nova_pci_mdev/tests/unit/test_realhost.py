"""The real-host tool's pure parts: what it installs, how it reads apt, how
check records become the summary line and the report.

The VM itself runs only under ``tools/realhost`` (minutes, root); these
tests keep its decisions honest in the fast suite.
"""

import io
import json
import os
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import fixtures
import testtools

from nova_pci_mdev.tests.realhost import debian
from nova_pci_mdev.tests.realhost import guestfiles
from nova_pci_mdev.tests.realhost import image
from nova_pci_mdev.tests.realhost import nova_all
from nova_pci_mdev.tests.realhost import record
from nova_pci_mdev.tests.realhost import report
from nova_pci_mdev.tests.realhost import scenario
from nova_pci_mdev.tests.realhost import series_guest
from nova_pci_mdev.tests.realhost import vm

DEPENDS = '''linux-image-amd64
  Depends: linux-image-6.1.0-57-amd64
'''
POLICY = '''linux-image-6.1.0-57-amd64-unsigned:
  Installed: (none)
  Candidate: 6.1.192-3
  Version table:
'''
DEB822 = '''Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: https://other.example/node
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/nodesource.gpg
'''


class TestDebian(testtools.TestCase):

    def test_kernel_release_from_the_metapackage(self):
        self.assertEqual('6.1.0-57-amd64', debian.kernel_release(DEPENDS))

    def test_kernel_release_refuses_what_it_cannot_read(self):
        for text in ('', 'linux-image-amd64\n  Depends: foo\n',
                     DEPENDS + '  Depends: linux-image-6.1.0-58-amd64\n'):
            self.assertRaises(debian.AptError, debian.kernel_release, text)

    def test_candidate(self):
        self.assertEqual('6.1.192-3', debian.candidate(POLICY))
        self.assertIsNone(debian.candidate(
            POLICY.replace('6.1.192-3', '(none)')))
        self.assertIsNone(debian.candidate('N: Unable to locate package'))

    def test_packages_name_the_release(self):
        self.assertIn('linux-headers-6.1.0-57-amd64',
                      debian.host_packages('6.1.0-57-amd64'))
        guest = debian.guest_packages('6.1.0-57-amd64')
        self.assertIn('linux-image-6.1.0-57-amd64-unsigned', guest)
        for name in ('mdevctl', 'libvirt-daemon-system', 'qemu-system-x86',
                     'udev', 'python3'):
            self.assertIn(name, guest)

    def test_deb822_sources_keep_debian_suites_only(self):
        mirror, lines = debian.debian_sources([
            ('/etc/apt/sources.list.d/debian.sources', DEB822)])
        self.assertEqual('http://mirror.example/debian', mirror)
        self.assertEqual([
            'deb http://mirror.example/debian bookworm main',
            'deb http://mirror.example/debian bookworm-updates main',
            'deb http://mirror.example/debian-security bookworm-security '
            'main'], lines)

    def test_one_line_sources(self):
        text = ('# comment\ndeb http://m.example/debian bookworm main '
                'contrib\ndeb-src http://m.example/debian bookworm main\n'
                'deb [arch=amd64] https://x.example/apt stable main\n'
                'deb http://m.example/debian trixie main\n')
        mirror, lines = debian.debian_sources([('/etc/apt/sources.list',
                                                text)])
        self.assertEqual('http://m.example/debian', mirror)
        self.assertEqual(['deb http://m.example/debian bookworm main '
                          'contrib'], lines)

    def test_no_bookworm_source_is_an_error_naming_the_files(self):
        exc = self.assertRaises(debian.AptError, debian.debian_sources, [
            ('/etc/apt/sources.list', 'deb http://m/debian trixie main\n')])
        self.assertIn('/etc/apt/sources.list', str(exc))


class TestImageKeys(testtools.TestCase):

    def _tree(self):
        repo = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(repo, 'nova_pci_mdev', 'data'))
        for name in ('setup.cfg', 'setup.py', 'README.md',
                     'nova_pci_mdev/__init__.py', 'nova_pci_mdev/data/x'):
            with open(os.path.join(repo, name), 'w') as handle:
                handle.write(name)
        return repo

    def test_tree_digest_follows_the_project_files_only(self):
        repo = self._tree()
        first = image.tree_digest(repo)
        os.makedirs(os.path.join(repo, 'nova_pci_mdev', '__pycache__'))
        with open(os.path.join(repo, 'nova_pci_mdev', '__pycache__',
                               'a.pyc'), 'w') as handle:
            handle.write('bytecode')
        with open(os.path.join(repo, 'unrelated.txt'), 'w') as handle:
            handle.write('x')
        self.assertEqual(first, image.tree_digest(repo))
        with open(os.path.join(repo, 'nova_pci_mdev', 'data', 'x'),
                  'a') as handle:
            handle.write('changed')
        self.assertNotEqual(first, image.tree_digest(repo))

    def test_digest_separates_parts(self):
        self.assertNotEqual(image.digest('ab', 'c'), image.digest('a', 'bc'))

    def test_guest_files_change_the_key(self):
        self.assertEqual(guestfiles.digest(), guestfiles.digest())
        self.assertIn('realhost\\.phase=', guestfiles.RUNNER)
        self.assertIn('mtty', guestfiles.MODULES)

    def test_libvirt_guests_does_not_wait_for_os_less_guests(self):
        conf = dict(line.split('=', 1) for line in
                    guestfiles.LIBVIRT_GUESTS.splitlines()
                    if '=' in line and not line.startswith('#'))
        self.assertEqual('ignore', conf['ON_BOOT'])
        self.assertEqual('shutdown', conf['ON_SHUTDOWN'])
        self.assertLessEqual(int(conf['SHUTDOWN_TIMEOUT']), 30)
        self.assertIn('/etc/default/libvirt-guests', guestfiles.files())

    def test_safe_rmtree_refuses_a_tree_with_a_mount_inside(self):
        # /proc is a mount point on every Linux host, in a chroot too
        # (where / itself need not be one)
        self.assertIn('/proc', image.mounts_under('/proc'))
        self.assertIn('/proc', image.mounts_under('/'))
        self.assertRaises(Exception, image.safe_rmtree, '/proc')
        gone = os.path.join(self.useFixture(fixtures.TempDir()).path, 'x')
        os.makedirs(os.path.join(gone, 'y'))
        image.safe_rmtree(gone)
        self.assertFalse(os.path.exists(gone))


def _write(path, data):
    with open(path, 'w') as handle:
        handle.write(data if isinstance(data, str) else json.dumps(data))


class TestReport(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _phase(self, phase, checks, rc='0', log='log line\n'):
        if checks is not None:
            _write(os.path.join(self.dir, 'checks-%s.json' % phase), checks)
        if rc is not None:
            _write(os.path.join(self.dir, 'phase-%s.rc' % phase), rc + '\n')
        _write(os.path.join(self.dir, 'phase-%s.log' % phase), log)

    def test_checks_of_every_phase_are_counted(self):
        self._phase('a', [{'id': 'x', 'title': 'X', 'ok': True}])
        self._phase('b', [{'id': 'y', 'title': 'Y', 'ok': False,
                           'detail': 'broke'}], rc='1')
        checks = report.load_checks(self.dir, ('a', 'b'))
        self.assertEqual((1, 1), report.counts(checks))
        self.assertEqual('1 passed, 1 failed', report.summary_line(1, 1))
        self.assertIn('FAIL  b        y', report.table(checks))
        self.assertIn('broke', report.table(checks))

    def test_a_phase_without_checks_is_one_failure_quoting_its_log(self):
        self._phase('a', None, rc=None, log='Traceback: boom\n')
        checks = report.load_checks(self.dir, ('a',))
        self.assertEqual((0, 1), report.counts(checks))
        self.assertIn('boom', checks[0]['observed'][0]['output'])

    def test_a_crashed_runner_fails_even_with_passing_checks(self):
        self._phase('a', [{'id': 'x', 'title': 'X', 'ok': True}], rc='137')
        checks = report.load_checks(self.dir, ('a',))
        self.assertEqual((1, 1), report.counts(checks))
        self.assertIn('137', checks[-1]['detail'])

    def test_malformed_records_and_truthy_ok_do_not_pass(self):
        self._phase('a', [{'id': 'x', 'title': 'X', 'ok': 'yes'}])
        self._phase('b', {'not': 'a list'})
        self._phase('c', 'not json')
        checks = report.load_checks(self.dir, ('a', 'b', 'c'))
        self.assertEqual((0, 3), report.counts(checks))

    def test_markdown_lists_every_check_and_what_was_observed(self):
        checks = [{'id': 'x', 'phase': 'a', 'title': 'X | pipe', 'ok': True,
                   'detail': '', 'observed': [
                       {'what': 'virsh version', 'rc': 0,
                        'output': 'libvirt 9.0.0 ```' + 'z' * 3000}]}]
        text = report.markdown({'kernel': '6.1', 'boots_s': {'a': 3}},
                               checks)
        self.assertIn('**1 passed, 0 failed**', text)
        self.assertIn('X \\| pipe', text)
        self.assertIn('`virsh version` -> exit 0', text)
        self.assertIn('more characters', text)
        self.assertEqual(0, text.count('```') % 2)

    def test_write_report_keeps_the_hand_written_head(self):
        path = os.path.join(self.dir, 'REALHOST.md')
        checks = [{'id': 'x', 'phase': 'a', 'title': 'X', 'ok': False,
                   'detail': 'no', 'observed': []}]
        report.write_report(path, {}, checks)
        with open(path) as handle:
            first = handle.read()
        self.assertTrue(first.startswith(report.TITLE))
        self.assertIn('**0 passed, 1 failed**', first)
        with open(path, 'w') as handle:
            handle.write(first.replace(report.TITLE, '# Mine\n\nfindings\n'))
        checks[0]['ok'] = True
        report.write_report(path, {}, checks)
        with open(path) as handle:
            second = handle.read()
        self.assertTrue(second.startswith('# Mine\n\nfindings\n\n'))
        self.assertEqual(1, second.count(report.MARKER))
        self.assertIn('**1 passed, 0 failed**', second)
        self.assertNotIn('0 passed, 1 failed', second)


class TestRecorder(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # The progress lines go here, not to the test run's output: a
        # check failing on purpose must not print "realhost: FAIL" there.
        self.progress = io.StringIO()
        self.rec = record.Recorder('p', self.dir, progress=self.progress)

    def _saved(self):
        with open(os.path.join(self.dir, 'checks-p.json')) as handle:
            return json.load(handle)

    def test_pass_fail_and_exception(self):
        with self.rec.check('ok', 'passes') as check:
            check.run(['true'], expect=0)
        with self.rec.check('bad', 'fails') as check:
            check.expect(False, 'it said no')
        with self.rec.check('boom', 'raises') as check:
            raise ValueError('unexpected')
        saved = self._saved()
        self.assertEqual([True, False, False], [c['ok'] for c in saved])
        self.assertEqual('it said no', saved[1]['detail'])
        self.assertIn('ValueError: unexpected', saved[2]['detail'])
        self.assertTrue(self.rec.failed())
        self.assertEqual(['realhost: check ok: passes', 'realhost: PASS ok',
                          'realhost: check bad: fails', 'realhost: FAIL bad',
                          'realhost: check boom: raises',
                          'realhost: FAIL boom'],
                         self.progress.getvalue().splitlines())

    def test_a_required_check_aborts_the_phase(self):
        def go():
            with self.rec.check('need', 'required', required=True) as check:
                check.run(['false'], expect=0)
        self.assertRaises(record.Abort, go)
        self.assertIn('exited 1, expected 0', self._saved()[0]['detail'])

    def test_commands_are_recorded_with_time_outs(self):
        with self.rec.check('slow', 'times out') as check:
            result = check.run(['sleep', '5'], timeout=0.2)
            check.expect(result.rc == 'timeout after 0 s', result.rc)
        with self.rec.check('missing', 'no such program') as check:
            self.assertIn('cannot run', check.run(['/nonexistent/x']).rc)
        self.assertEqual([True, True], [c['ok'] for c in self._saved()])


class TestKvmProbeCache(testtools.TestCase):

    def test_a_cached_answer_is_used_until_the_guest_kernel_changes(self):
        cache = self.useFixture(fixtures.TempDir()).path
        kernel = os.path.join(cache, 'vmlinuz')
        _write(kernel, 'kernel one')
        key = vm._probe_key(kernel)
        _write(os.path.join(cache, 'kvm-probe.json'),
               {'key': key, 'ok': False, 'reason': 'nested KVM hangs'})
        self.assertEqual((False, 'nested KVM hangs (cached probe)'),
                         vm.cached_probe(None, kernel, cache, cache))
        _write(kernel, 'kernel two, longer')
        self.assertNotEqual(key, vm._probe_key(kernel))
        self.assertEqual(vm.TCG, vm.choose_accel(None, 'tcg', kernel, cache,
                                                 cache)[0])


class TestScenarioPieces(testtools.TestCase):

    def test_domain_xml_holds_the_cli_hostdevs(self):
        devices = ('<devices><hostdev mode="subsystem" type="mdev" '
                   'model="vfio-pci"><source><address uuid="u1"/></source>'
                   '</hostdev></devices>')
        root = ET.fromstring(scenario.domain_xml(devices, 'd'))
        self.assertEqual('qemu', root.get('type'))
        self.assertEqual('d', root.findtext('name'))
        hostdevs = root.findall('devices/hostdev')
        self.assertEqual(['u1'], [h.find('source/address').get('uuid')
                                  for h in hostdevs])


class TestSeriesPieces(testtools.TestCase):
    """The pure parts of tools/realhost --series (the rest runs in the VM
    with the patched Nova)."""

    def test_api_paste_swaps_the_token_check_for_the_stand_in(self):
        original = (
            '[composite:x]\nkeystone = cors faultwrap authtoken '
            'keystonecontext osapi_compute_app_v21\n')
        text = nova_all.api_paste(original)
        self.assertIn(' realhost_identity keystonecontext ', text)
        self.assertNotIn('authtoken', text)
        self.assertIn('nova_all:IdentityStandIn.factory', text)
        self.assertRaises(ValueError, nova_all.api_paste, '[app:x]\n')

    def test_identity_stand_in_is_the_admin(self):
        seen = {}
        app = nova_all.IdentityStandIn(lambda env, start: seen.update(env))
        app({'HTTP_X_AUTH_TOKEN': 'admin:admin'}, None)
        self.assertEqual(('admin', 'admin', 'Confirmed'), (
            seen['HTTP_X_USER_ID'], seen['HTTP_X_PROJECT_ID'],
            seen['HTTP_X_IDENTITY_STATUS']))
        self.assertIn('admin', seen['HTTP_X_ROLES'].split(','))

    def _get(self, kind, path):
        httpd = nova_all.serve_stand_in(kind, 0)
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        url = 'http://127.0.0.1:%d%s' % (httpd.server_address[1], path)
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def test_image_stand_in(self):
        status, body = self._get('image', '/v2/images/%s' % nova_all.IMAGE_ID)
        self.assertEqual(200, status)
        record = json.loads(body)
        self.assertEqual(('active', 'raw', nova_all.IMAGE_SIZE), (
            record['status'], record['disk_format'], record['size']))
        status, body = self._get(
            'image', '/v2/images/%s/file' % nova_all.IMAGE_ID)
        self.assertEqual((200, b'\0' * nova_all.IMAGE_SIZE), (status, body))
        status, body = self._get('image', '/v2/schemas/image')
        self.assertIn('id', json.loads(body)['properties'])
        self.assertEqual(404, self._get('image', '/v2/images/other')[0])

    def test_network_stand_in_has_no_ports(self):
        self.assertEqual(
            (200, {'ports': []}),
            (lambda r: (r[0], json.loads(r[1])))(self._get(
                'network', '/v2.0/ports.json?device_id=x')))
        self.assertEqual(404, self._get('network', '/v2.0/ports/x')[0])

    def test_domain_xml_mdevs(self):
        xml = """<domain><devices>
          <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
            <source><address uuid='b'/></source></hostdev>
          <hostdev mode='subsystem' type='pci'>
            <source><address domain='0' bus='1' slot='0' function='0'/>
            </source></hostdev>
          <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
            <source><address uuid='a'/></source></hostdev>
        </devices></domain>"""
        self.assertEqual(['a', 'b'], series_guest.mdev_uuids(xml))

    def test_break_prepare_takes_out_a_line_the_series_adds(self):
        # --break-prepare edits the patched driver; the lines it replaces
        # must be lines a patch adds, or the run would build nothing broken
        path, old, _ = image.BREAK_PREPARE
        added = []
        for name in image.series_patches(image_repo()):
            with open(name, encoding='utf-8') as handle:
                added += [line[1:] for line in handle.read().splitlines()
                          if line.startswith('+') and
                          not line.startswith('+++')]
        for line in old.splitlines():
            self.assertIn(line, added)
        self.assertIn('nova/virt/libvirt/driver.py', path)

    def test_series_configs_differ_only_in_the_opt_in(self):
        self.assertIn('"address": "mtty_mtty"', series_guest.PCI_PATH)
        self.assertIn('"max_instances": %d' % series_guest.SLOTS,
                      series_guest.PCI_PATH)
        self.assertNotIn('device_spec', series_guest.PLACEMENT_PATH)
        self.assertIn('alias', series_guest.PLACEMENT_PATH)

    def test_series_databases_are_mariadb(self):
        self.assertEqual(
            'mysql+pymysql://nova:realhost@127.0.0.1/nova_cell0?charset=utf8',
            series_guest.db_url('nova_cell0'))
        self.assertIn('mariadb-server', debian.GUEST_PACKAGES)
        self.assertIn('PyMySQL', image.SERIES_REQUIREMENTS)
        self.assertNotIn('sqlite', series_guest._NOVA_CONF)
        self.assertNotIn('sqlite', series_guest._PLACEMENT_CONF)


def image_repo():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
