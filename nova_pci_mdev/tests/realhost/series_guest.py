"""Inside the VM: the Nova patch series on the real kernel (``tools/realhost
--series``).

Run at boot by ``realhost-run`` for the phases ``series`` (first boot) and
``series-reboot`` (the second boot of the same disk) as ``python -m
nova_pci_mdev.tests.realhost.series_guest --phase NAME --out /results``
with the series venv (the patched Nova 34.0.0 and openstack-placement).
Nova runs as :mod:`.nova_all` (one process, real services); each check
drives Nova's REST API and asserts on what the host got: the guest's
domain XML (``virsh dumpxml``), the kernel's mdevs (``/sys/bus/mdev``),
libvirt's node devices (``virsh nodedev-info``), Nova's database (its
``pci_devices`` table, read with PyMySQL) and Placement's providers.
Nova's and Placement's databases are on the VM's MariaDB server (started
by each phase: it does not start at boot), set up with ``nova-manage`` as a
deployment does.

First boot: nova-compute starts with mtty's mdevs handed out through the
alias; a server with ``mtty:1``, one with ``mtty:2``; a third that does not
fit (NoValidHost, nothing created); the first deleted and its mdev reused.
Second boot: the mdevs of the two servers come back with nova-compute; a
hard reboot gets the server its device; nova-compute refuses to start when
the configuration would give the parent to Placement while guests use its
mdevs; with the servers gone and the parent not opted in, the Placement
path (``resources:VGPU=1``) boots a server with an mtty mdev.
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

from nova_pci_mdev.tests.realhost import guest
from nova_pci_mdev.tests.realhost import record

URI = 'qemu:///system'
PARENT = 'mtty_mtty'          # libvirt's name of the mtty parent
SYSFS_PARENT = 'mtty'         # its sysfs name
MDEV_TYPE = 'mtty-2'
#: the device spec's max_instances: three slots, so that the third server
#: does not fit (a fresh mtty could create twelve mtty-2 mdevs)
SLOTS = 3
SYSFS_MDEVS = '/sys/bus/mdev/devices'
NOVA_CONF = '/etc/nova/nova.conf'
API_PASTE = '/etc/nova/api-paste.ini'
PLACEMENT_DIR = '/etc/placement'
STATE = '/var/lib/realhost/series.json'
#: MariaDB in the VM: one user for Nova and Placement, their databases
DB_USER = 'nova'
DB_PASSWORD = 'realhost'
DATABASES = ('nova_api', 'nova', 'nova_cell0', 'placement')
NOVA_DB = 'nova'


def db_url(name):
    return 'mysql+pymysql://%s:%s@127.0.0.1/%s?charset=utf8' % (
        DB_USER, DB_PASSWORD, name)


API = 'http://127.0.0.1:8774/v2.1'
PLACEMENT = 'http://127.0.0.1:8778'
LOG = '/var/log/nova/nova-all.log'
ACTIVE_TIMEOUT = 420

_NOVA_CONF = '''[DEFAULT]
host = realhost
compute_driver = libvirt.LibvirtDriver
state_path = /var/lib/nova
instances_path = /var/lib/nova/instances
transport_url = fake:/
log_file = %(log)s
debug = true
use_stderr = false
my_ip = 127.0.0.1

[api]
auth_strategy = noauth2

[wsgi]
api_paste_config = %(paste)s

[api_database]
connection = %(api_db)s

[database]
connection = %(db)s

[oslo_concurrency]
lock_path = /var/lib/nova/tmp

[libvirt]
virt_type = qemu
connection_uri = %(uri)s

[vnc]
enabled = false

[spice]
enabled = false

[devices]
enabled_mdev_types = %(type)s

[mdev_%(type)s]
device_addresses = %(parent)s

[pci]
%(pci)s

[filter_scheduler]
enabled_filters = ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,PciPassthroughFilter,NUMATopologyFilter

[scheduler]
discover_hosts_in_cells_interval = -1

[placement]
auth_type = admin_token
endpoint = %(placement)s
token = admin
region_name = RegionOne

[glance]
endpoint_override = http://127.0.0.1:9292

[neutron]
auth_type = admin_token
endpoint = http://127.0.0.1:9696
token = admin
endpoint_override = http://127.0.0.1:9696

[cinder]
os_region_name = RegionOne

[os_vif_ovs]
ovsdb_connection = unix:/nonexistent

[workarounds]
disable_compute_service_check_for_ffu = true
'''

#: The series' PCI path: the parent opted in by a device spec naming it
#: and its mdev type; the alias every flavor uses.
PCI_PATH = ('device_spec = {"address": "%s", "mdev_type": "%s", '
            '"max_instances": %d}\nalias = {"name": "mtty", "mdev_type": '
            '"%s"}' % (PARENT, MDEV_TYPE, SLOTS, MDEV_TYPE))
#: Not opted in: no device spec at all (the alias stays on the API side).
PLACEMENT_PATH = 'alias = {"name": "mtty", "mdev_type": "%s"}' % MDEV_TYPE

_PLACEMENT_CONF = '''[DEFAULT]
log_file = %(log)s
debug = false

[api]
auth_strategy = noauth2

[placement_database]
connection = %(db)s
sync_on_startup = true
'''


def write_config(check, pci, paste_dist='/etc/nova/api-paste.ini.dist'):
    from nova_pci_mdev.tests.realhost import nova_all
    text = _NOVA_CONF % {
        'log': LOG, 'paste': API_PASTE, 'db': db_url(NOVA_DB),
        'api_db': db_url('nova_api'), 'uri': URI,
        'type': MDEV_TYPE, 'parent': PARENT, 'pci': pci,
        'placement': PLACEMENT}
    for path in ('/var/lib/nova/instances', '/var/lib/nova/tmp',
                 '/var/lib/placement', '/var/log/nova', PLACEMENT_DIR,
                 os.path.dirname(NOVA_CONF), os.path.dirname(STATE)):
        os.makedirs(path, exist_ok=True)
    with open(NOVA_CONF, 'w') as handle:
        handle.write(text)
    with open(paste_dist) as handle:
        paste = nova_all.api_paste(handle.read())
    with open(API_PASTE, 'w') as handle:
        handle.write(paste)
    with open(os.path.join(PLACEMENT_DIR, 'placement.conf'), 'w') as handle:
        handle.write(_PLACEMENT_CONF % {'log': LOG,
                                        'db': db_url('placement')})
    check.observe('[pci] of %s' % NOVA_CONF, pci)


# -- Nova as a process -----------------------------------------------------

class Nova:
    """The :mod:`.nova_all` process."""

    def __init__(self):
        self.proc = None
        self.output = ''

    def start(self, check, timeout=900):
        """Start it; return (ready, output) once it says ready or failed."""
        argv = [sys.executable, '-m', 'nova_pci_mdev.tests.realhost.nova_all',
                '--config-file', NOVA_CONF]
        started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors='replace', stdin=subprocess.DEVNULL)
        lines = []
        ready = False
        while time.monotonic() - started < timeout:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith('nova-all: ready'):
                ready = True
                break
            if line.startswith('nova-all: failed'):
                break
        if not ready:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.output = ''.join(lines)
        check.observe('%s (%.0f s)' % (' '.join(argv[1:]),
                                       time.monotonic() - started),
                      self.output[-3000:] or '(no output)',
                      None if ready else self.proc.returncode)
        return ready

    def stop(self, check):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        check.observe('stop nova-all', (out or '')[-1000:],
                      self.proc.returncode)
        self.proc = None


def log_tail(pattern, lines=40):
    """The lines of the Nova log around the last one containing
    ``pattern``."""
    try:
        with open(LOG, errors='replace') as handle:
            text = handle.read().splitlines()
    except FileNotFoundError:
        return '(no log)'
    hits = [i for i, line in enumerate(text) if pattern in line]
    if not hits:
        return '(no line with %r)' % pattern
    i = hits[-1]
    return '\n'.join(text[max(0, i - 5):i + lines])


def log_errors(server_id, lines=60):
    """The Nova log's ERROR lines (tracebacks included) about a server."""
    try:
        with open(LOG, errors='replace') as handle:
            text = handle.read().splitlines()
    except FileNotFoundError:
        return '(no log)'
    found = [line for line in text if ' ERROR ' in line and (
        server_id in line or 'Traceback' in line or line.split(
            ' ERROR ', 1)[1].startswith(('nova', 'oslo')))]
    mine = [i for i, line in enumerate(found) if server_id in line]
    if not mine:
        return '(no ERROR line names %s)' % server_id
    return '\n'.join(found[mine[0]:mine[0] + lines])


# -- REST ------------------------------------------------------------------

class Api:
    def __init__(self, check):
        self.check = check

    def call(self, method, url, body=None, version=None, expect=None,
             observe=True):
        headers = {'X-Auth-Token': 'admin:admin',
                   'Content-Type': 'application/json',
                   'Accept': 'application/json'}
        if url.startswith(API):
            headers['X-OpenStack-Nova-API-Version'] = version or 'latest'
        else:
            headers['OpenStack-API-Version'] = 'placement %s' % (
                version or '1.39')
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode(errors='replace')
        if observe:
            self.check.observe('%s %s%s' % (
                method, url, ' ' + json.dumps(body) if body else ''),
                text[:1500], status)
        if expect is not None and status != expect:
            raise record.CheckFailed('%s %s answered %s, expected %s: %s' % (
                method, url, status, expect, text[:500]))
        return json.loads(text) if text.strip() else None

    def flavor(self, name, extra_specs):
        flavor = self.call('POST', API + '/flavors', {'flavor': {
            'name': name, 'ram': 96, 'vcpus': 1, 'disk': 1}},
            expect=200)['flavor']
        self.call('POST', API + '/flavors/%s/os-extra_specs' % flavor['id'],
                  {'extra_specs': extra_specs}, expect=200)
        return flavor['id']

    def boot(self, name, flavor_id):
        from nova_pci_mdev.tests.realhost.nova_all import IMAGE_ID
        return self.call('POST', API + '/servers', {'server': {
            'name': name, 'imageRef': IMAGE_ID, 'flavorRef': flavor_id,
            'networks': 'none'}}, expect=202)['server']['id']

    def server(self, server_id, observe=False):
        return self.call('GET', API + '/servers/%s' % server_id,
                         expect=200, observe=observe)['server']

    def wait(self, server_id, wanted, timeout=ACTIVE_TIMEOUT):
        """Poll the server until its status is ``wanted``; a status of
        ERROR ends the wait at once (unless it is the one wanted)."""
        end = time.monotonic() + timeout
        while True:
            server = self.server(server_id)
            status = server['status']
            if status == wanted and server.get(
                    'OS-EXT-STS:task_state') is None:
                self.check.observe('server %s' % server_id, json.dumps({
                    k: server.get(k) for k in (
                        'status', 'OS-EXT-SRV-ATTR:instance_name',
                        'OS-EXT-STS:power_state', 'fault')}))
                return server
            if status == 'ERROR' and wanted != 'ERROR':
                self.check.observe('Nova log: errors about %s' % server_id,
                                   log_errors(server_id))
                raise record.CheckFailed('server %s went to ERROR: %s' % (
                    server_id, json.dumps(server.get('fault'))[:1500]))
            if time.monotonic() > end:
                self.check.observe('Nova log: errors about %s' % server_id,
                                   log_errors(server_id))
                raise record.CheckFailed(
                    'server %s is %s/%s after %d s, not %s' % (
                        server_id, status,
                        server.get('OS-EXT-STS:task_state'), timeout,
                        wanted))
            time.sleep(2)

    def delete(self, server_id, timeout=240):
        self.call('DELETE', API + '/servers/%s' % server_id, expect=204)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                self.call('GET', API + '/servers/%s' % server_id,
                          expect=404, observe=False)
                return
            except record.CheckFailed:
                time.sleep(2)
        raise record.CheckFailed('server %s still there after %d s'
                                 % (server_id, timeout))

    def providers(self):
        """{name: (uuid, inventories, traits)} from Placement."""
        found = {}
        for rp in self.call('GET', PLACEMENT + '/resource_providers',
                            expect=200)['resource_providers']:
            inv = self.call('GET', PLACEMENT + '/resource_providers/%s/'
                            'inventories' % rp['uuid'], expect=200)
            traits = self.call('GET', PLACEMENT + '/resource_providers/%s/'
                               'traits' % rp['uuid'], expect=200)
            found[rp['name']] = (rp['uuid'], inv['inventories'],
                                 traits['traits'])
        return found


# -- the host --------------------------------------------------------------

#: ``{uuid: (parent, type)}`` from the kernel, as the CLI scenario reads it
sysfs_mdevs = guest.Env.sysfs_mdevs


def virsh(check, *args, expect=0):
    return check.run(['virsh', '-c', URI] + list(args), timeout=300,
                     expect=expect)


def mdev_uuids(domain_xml):
    """The mdev UUIDs of a domain's ``<hostdev type='mdev'>``, sorted."""
    root = ET.fromstring(domain_xml)
    return sorted(
        addr.get('uuid') for hostdev in root.iter('hostdev')
        if hostdev.get('type') == 'mdev'
        for addr in hostdev.iter('address') if addr.get('uuid'))


def domain_mdevs(check, instance_name):
    return mdev_uuids(virsh(check, 'dumpxml', instance_name).stdout)


def db_devices(check, where='', args=()):
    """Rows of Nova's pci_devices table (not deleted)."""
    query = ('SELECT address, parent_addr, dev_type, mdev_type, status, '
             'instance_uuid, numa_node, vendor_id, product_id FROM '
             'pci_devices WHERE deleted = 0 %s ORDER BY dev_type, address'
             % where)
    import pymysql
    con = pymysql.connect(host='127.0.0.1', user=DB_USER,
                          password=DB_PASSWORD, database=NOVA_DB,
                          connect_timeout=60)
    try:
        with con.cursor() as cursor:
            cursor.execute(query, args)
            rows = [dict(zip(('address', 'parent_addr', 'dev_type',
                              'mdev_type', 'status', 'instance_uuid',
                              'numa_node', 'vendor_id', 'product_id'), row))
                    for row in cursor.fetchall()]
    finally:
        con.close()
    check.observe('MariaDB %s: %s %s' % (NOVA_DB, query, list(args)),
                  json.dumps(rows, indent=1))
    return rows


def node_device_name(uuid):
    return 'mdev_%s_%s' % (uuid.replace('-', '_'), SYSFS_PARENT)


def assert_server_mdevs(check, api, server_id, count):
    """The server runs with ``count`` mdevs that the tracker gave it, that
    its domain XML names, that the kernel has on mtty with the claimed
    type, and that libvirt keeps as persistent autostarted node devices.
    Returns their UUIDs."""
    server = api.server(server_id, observe=True)
    name = server['OS-EXT-SRV-ATTR:instance_name']
    rows = db_devices(check, 'AND instance_uuid = %s', (server_id,))
    claimed = sorted(row['address'] for row in rows)
    check.expect(len(rows) == count, 'Nova\'s DB has %d devices for %s, '
                 'expected %d' % (len(rows), server_id, count))
    for row in rows:
        check.expect((row['dev_type'], row['mdev_type'], row['parent_addr'],
                      row['status']) == ('mdev-vf', MDEV_TYPE, PARENT,
                                         'allocated'),
                     'unexpected claimed device %s' % row)
    in_xml = domain_mdevs(check, name)
    check.expect(in_xml == claimed, 'domain %s has mdevs %s, the tracker '
                 'claimed %s' % (name, in_xml, claimed))
    state = virsh(check, 'domstate', name).stdout.strip()
    check.expect(state == 'running', 'domain %s is %s' % (name, state))
    kernel = sysfs_mdevs()
    check.observe('ls %s (uuid: parent, type)' % SYSFS_MDEVS,
                  json.dumps(kernel, indent=1))
    for uuid in claimed:
        check.expect(kernel.get(uuid) == (SYSFS_PARENT, MDEV_TYPE),
                     'mdev %s is %s in sysfs, expected on %s of type %s' % (
                         uuid, kernel.get(uuid), SYSFS_PARENT, MDEV_TYPE))
        info = virsh(check, 'nodedev-info', node_device_name(uuid)).stdout
        fields = {k.strip(): v.strip() for k, _, v in (
            line.partition(':') for line in info.splitlines())}
        check.expect(fields.get('Persistent') == 'yes' and
                     fields.get('Autostart') == 'yes',
                     'node device %s is not persistent and autostarted: %s'
                     % (node_device_name(uuid), fields))
    return claimed


def load_state():
    return guest.read_handover(STATE)


def save_state(data):
    guest.write_handover(STATE, data)


def start_database(check, create=False):
    """Start the VM's MariaDB (it does not start at boot); with
    ``create``, its databases and the user Nova and Placement connect as."""
    if not os.path.isdir('/var/lib/mysql/mysql'):
        check.run(['mariadb-install-db', '--user=mysql',
                   '--skip-test-db'], timeout=600, expect=0)
    check.run(['systemctl', 'start', 'mariadb'], timeout=900, expect=0)
    if not create:
        return
    sql = []
    for name in DATABASES:
        sql.append('CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8'
                   % name)
    for host in ('localhost', '127.0.0.1'):
        sql.append("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'"
                   % (DB_USER, host, DB_PASSWORD))
        for name in DATABASES:
            sql.append("GRANT ALL PRIVILEGES ON %s.* TO '%s'@'%s'"
                       % (name, DB_USER, host))
    check.run(['mariadb', '-e', '; '.join(sql)], timeout=300, expect=0)


def wait_for_libvirt(check):
    check.run(['udevadm', 'settle', '--timeout=120'], timeout=180)
    end = time.monotonic() + 180
    while subprocess.run(['virsh', '-c', URI, 'version'],
                         capture_output=True).returncode != 0:
        if time.monotonic() > end:
            raise record.CheckFailed('libvirtd did not answer on %s' % URI)
        time.sleep(2)
    virsh(check, 'nodedev-dumpxml', PARENT)


# -- the phases ------------------------------------------------------------

class Steps:
    """``rec.check`` that also copies the Nova log to the results after
    each check (a phase that hangs or dies keeps it)."""

    def __init__(self, rec, out):
        self.rec = rec
        self.out = out

    @contextlib.contextmanager
    def check(self, ident, title, required=False):
        try:
            with self.rec.check(ident, title, required=required) as check:
                yield check
        finally:
            if os.path.exists(LOG):
                shutil.copy(LOG, os.path.join(
                    self.out, 'nova-%s.log' % self.rec.phase))

    def fact(self, key, value):
        self.rec.fact(key, value)


def first_boot(rec, nova):
    state = {}
    with rec.check('series-start', 'the patched nova-compute starts with '
                   'mtty opted in to the PCI tracker', required=True) as c:
        wait_for_libvirt(c)
        start_database(c, create=True)
        write_config(c, PCI_PATH)
        for cmd in (['api_db', 'sync'],
                    ['cell_v2', 'map_cell0', '--database_connection',
                     db_url('nova_cell0')],
                    ['cell_v2', 'create_cell', '--name', 'cell1',
                     '--transport-url', 'none://cell1/'],
                    ['db', 'sync']):
            c.run([os.path.join(os.path.dirname(sys.executable),
                                'nova-manage'), '--config-file', NOVA_CONF]
                  + cmd, timeout=1200, expect=0)
        c.expect(nova.start(c), 'nova-all did not start: %s'
                 % nova.output[-1500:])

    with rec.check('series-tracker', 'the PCI tracker has mtty_mtty '
                   '(mdev-pf, no PCI ids or NUMA node) and its slots; '
                   'Placement has no VGPU of it') as c:
        api = Api(c)
        rows = db_devices(c)
        parents = [r for r in rows if r['dev_type'] == 'mdev-pf']
        slots = [r for r in rows if r['dev_type'] == 'mdev-vf']
        c.expect([(p['address'], p['mdev_type'], p['numa_node'],
                   p['vendor_id'], p['product_id']) for p in parents] ==
                 [(PARENT, MDEV_TYPE, None, '', '')],
                 'parents in the tracker: %s' % parents)
        c.expect(len(slots) == SLOTS and all(
            s['parent_addr'] == PARENT and s['status'] == 'available'
            for s in slots), 'slots in the tracker: %s' % slots)
        providers = api.providers()
        c.expect(not any('VGPU' in inv for _, inv, _ in providers.values()),
                 'a provider has VGPU inventory: %s' % providers)
        c.expect('CUSTOM_COMPUTE_PCI_MDEV' in providers.get(
            'realhost', (None, {}, []))[2],
            'the compute node provider lacks CUSTOM_COMPUTE_PCI_MDEV')
        state['flavor1'] = api.flavor(
            'mtty1', {'pci_passthrough:alias': 'mtty:1'})
        state['flavor2'] = api.flavor(
            'mtty2', {'pci_passthrough:alias': 'mtty:2'})
        save_state(state)

    with rec.check('series-boot-1', 'a server with mtty:1 runs with its '
                   'mdev', required=True) as c:
        api = Api(c)
        state['a'] = api.boot('a', state['flavor1'])
        api.wait(state['a'], 'ACTIVE')
        state['a_mdevs'] = assert_server_mdevs(c, api, state['a'], 1)
        save_state(state)

    with rec.check('series-boot-2', 'a server with mtty:2 runs with two '
                   'other mdevs') as c:
        api = Api(c)
        state['b'] = api.boot('b', state['flavor2'])
        api.wait(state['b'], 'ACTIVE')
        state['b_mdevs'] = assert_server_mdevs(c, api, state['b'], 2)
        c.expect(not set(state['b_mdevs']) & set(state['a_mdevs']),
                 'b got an mdev of a')
        save_state(state)

    with rec.check('series-full', 'a third server does not fit: '
                   'NoValidHost, no mdev or domain created') as c:
        api = Api(c)
        before = sorted(sysfs_mdevs())
        domains = virsh(c, 'list', '--all', '--name').stdout.split()
        server_id = api.boot('c', state['flavor1'])
        server = api.wait(server_id, 'ERROR')
        fault = json.dumps(server.get('fault'))
        c.expect('No valid host' in fault, 'fault: %s' % fault)
        c.expect(sorted(sysfs_mdevs()) == before, 'the mdevs changed')
        c.expect(virsh(c, 'list', '--all', '--name').stdout.split()
                 == domains, 'the domains changed')
        c.expect(db_devices(c, 'AND instance_uuid = %s', (server_id,)) == [],
                 'the tracker claimed devices for it')
        api.delete(server_id)

    with rec.check('series-reuse', 'a deleted server\'s mdev stays and the '
                   'next server gets it') as c:
        api = Api(c)
        api.delete(state['a'])
        freed = state['a_mdevs'][0]
        c.expect(freed in sysfs_mdevs(), 'mdev %s of the deleted server '
                 'is gone from sysfs' % freed)
        rows = db_devices(c, 'AND address = %s', (freed,))
        c.expect([r['status'] for r in rows] == ['available'],
                 'its slot is %s' % rows)
        state['d'] = api.boot('d', state['flavor1'])
        api.wait(state['d'], 'ACTIVE')
        state['d_mdevs'] = assert_server_mdevs(c, api, state['d'], 1)
        c.expect(state['d_mdevs'] == [freed], 'd got %s, not the freed %s'
                 % (state['d_mdevs'], freed))
        save_state(state)

    with rec.check('series-stop', 'nova-all stops; the VM reboots') as c:
        nova.stop(c)
        c.observe('mdevctl list --defined', subprocess.run(
            ['mdevctl', 'list', '--defined'], capture_output=True,
            text=True).stdout)


def after_reboot(rec, nova):
    state = load_state()
    with rec.check('series-reboot-start', 'after the VM reboot nova-compute '
                   'starts and the servers\' mdevs are back, same UUIDs on '
                   'mtty', required=True) as c:
        c.expect(state.get('b') and state.get('d'), 'no hand-over from the '
                 'first boot: %s' % state)
        wait_for_libvirt(c)
        start_database(c)
        before = sysfs_mdevs()
        c.observe('mdevs in sysfs before nova-compute starts',
                  json.dumps(before))
        rec.fact('series_mdevs_at_boot', len(before))
        c.expect(nova.start(c), 'nova-all did not start: %s'
                 % nova.output[-1500:])
        kernel = sysfs_mdevs()
        c.observe('mdevs in sysfs after nova-compute started',
                  json.dumps(kernel))
        for uuid in state['b_mdevs'] + state['d_mdevs']:
            c.expect(kernel.get(uuid) == (SYSFS_PARENT, MDEV_TYPE),
                     'mdev %s is %s' % (uuid, kernel.get(uuid)))
        api = Api(c)
        for key in ('b', 'd'):
            server = api.server(state[key], observe=True)
            c.observe('virsh domstate %s' % key, virsh(
                c, 'domstate', server['OS-EXT-SRV-ATTR:instance_name'],
                expect=None).stdout)

    with rec.check('series-hard-reboot', 'a hard reboot gets the server its '
                   'device back') as c:
        api = Api(c)
        api.call('POST', API + '/servers/%s/action' % state['d'],
                 {'reboot': {'type': 'HARD'}}, expect=202)
        time.sleep(2)
        api.wait(state['d'], 'ACTIVE')
        mdevs = assert_server_mdevs(c, api, state['d'], 1)
        c.expect(mdevs == state['d_mdevs'], 'd has %s, had %s'
                 % (mdevs, state['d_mdevs']))

    with rec.check('series-refuse-move', 'nova-compute refuses to start '
                   'when the config would give the used parent to '
                   'Placement') as c:
        nova.stop(c)
        write_config(c, PLACEMENT_PATH)
        ready = nova.start(c)
        if ready:
            nova.stop(c)
        c.expect(not ready, 'nova-compute started with mtty_mtty moved to '
                 'Placement while servers use its mdevs')
        c.observe('Nova log', log_tail('InvalidLibvirtMdevConfig'))
        c.expect('InvalidLibvirtMdevConfig' in nova.output and
                 PARENT in nova.output,
                 'the refusal does not name the parent: %s'
                 % nova.output[-1500:])

    with rec.check('series-placement-path', 'with the servers gone and the '
                   'parent not opted in, resources:VGPU=1 boots with an '
                   'mtty mdev (the Placement path)') as c:
        write_config(c, PCI_PATH)
        c.expect(nova.start(c), 'nova-all did not start again')
        api = Api(c)
        for key in ('b', 'd'):
            api.delete(state[key])
        nova.stop(c)
        write_config(c, PLACEMENT_PATH)
        c.expect(nova.start(c), 'nova-all did not start with the Placement '
                 'path: %s' % nova.output[-1500:])
        rows = db_devices(c)
        c.expect(rows == [], 'the tracker still has devices: %s' % rows)
        providers = api.providers()
        name = 'realhost_%s' % PARENT
        c.expect(name in providers and 'VGPU' in providers[name][1],
                 'no VGPU inventory on %s: %s' % (name, providers))
        flavor = api.flavor('vgpu1', {'resources:VGPU': '1'})
        server_id = api.boot('e', flavor)
        server = api.wait(server_id, 'ACTIVE')
        in_xml = domain_mdevs(c, server['OS-EXT-SRV-ATTR:instance_name'])
        kernel = sysfs_mdevs()
        c.expect(len(in_xml) == 1 and kernel.get(in_xml[0]) == (
            SYSFS_PARENT, MDEV_TYPE), 'domain mdevs %s, sysfs %s'
            % (in_xml, kernel))
        allocations = api.call('GET', PLACEMENT + '/allocations/%s'
                               % server_id, expect=200)['allocations']
        c.expect(providers[name][0] in allocations and allocations[
            providers[name][0]]['resources'] == {'VGPU': 1},
            'allocations: %s' % allocations)
        nova.stop(c)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('--phase', required=True,
                        choices=('series', 'series-reboot'))
    parser.add_argument('--out', required=True)
    args = parser.parse_args(argv)
    rec = record.Recorder(args.phase, args.out)
    nova = Nova()
    try:
        if args.phase == 'series':
            first_boot(Steps(rec, args.out), nova)
        else:
            after_reboot(Steps(rec, args.out), nova)
    except record.Abort as exc:
        print('realhost: phase %s stopped after required check %s failed'
              % (args.phase, exc), flush=True)
    finally:
        try:
            nova.stop(record.Check('cleanup', 'cleanup'))
        except Exception:
            pass
        if os.path.exists(LOG):
            subprocess.run(['cp', LOG, os.path.join(
                args.out, 'nova-%s.log' % args.phase)])
    rec.save()
    return 1 if rec.failed() else 0


if __name__ == '__main__':
    sys.exit(main())
