"""Compute hosts with faults injected from the outside, and the checks
every hardening story ends with.

The product is never patched: faults come from test doubles handed to its
constructors. :class:`FaultyWriter` is the sysfs writer the
``SysfsBackend`` takes (the kernel refusing the Nth ``create``/``remove``
with an errno); :class:`FaultyConnection` stands between ``Host`` or the
libvirt backend and the fake libvirt (the Nth call of a method fails, or
the connection dies at the Nth ``XMLDesc``). :func:`compute_on` builds a
``ComputeHost`` from a :class:`~..fixtures.compute.ComputeFixture`'s
pieces with such doubles, exactly as ``ComputeFixture.restart`` does.
"""

import collections
import errno as errno_mod
import os
import sqlite3

from nova_pci_mdev.compute import flavor as flavor_mod
from nova_pci_mdev.compute import host as compute_mod
from nova_pci_mdev.objects import fields
from nova_pci_mdev.tests.fixtures import fakelibvirt
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt.mdev import libvirt_backend as mdev_libvirt
from nova_pci_mdev.virt.libvirt.mdev import lifecycle as mdev
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs

Status = fields.PciDeviceStatus
DevType = fields.PciDeviceType
BUSY = (Status.CLAIMED, Status.ALLOCATED)

GPU0, GPU1, NIC = '0000:81:00.0', '0000:82:00.0', '0000:83:00.0'
EXISTING = '9a2f2b56-7a3b-4d47-8c77-2a7f6b0c5e01'
INSTANCE = 'a5cf8a44-6b07-4b5b-bb42-1b1f8b4c6d01'
INSTANCE2 = 'a5cf8a44-6b07-4b5b-bb42-1b1f8b4c6d02'


def two_gpus(kernel):
    """The fault-injection host::

        cell 0                              cell 1
        GPU0 0000:81:00.0 nvidia-35 x4      GPU1 0000:82:00.0 nvidia-35 x4
          (mdev EXISTING already there)
        X710 PF 0000:83:00.0 + 2 VFs
    """
    kernel.add_parent(GPU0, 0, {'nvidia-35': 4, 'nvidia-36': 2})
    kernel.add_parent(GPU1, 1, {'nvidia-35': 4, 'nvidia-36': 2})
    kernel.add_mdev(EXISTING, GPU0, 'nvidia-35')
    kernel.fake.add_sriov_pf(NIC, 2, numa_node=0)


class FaultyWriter(object):
    """The sysfs writer with planned refusals.

    ``fail(attribute, nth, err)``: the ``nth`` (1-based, counted from now)
    write to ``attribute`` raises ``OSError(err)`` before reaching the
    kernel. Other writes go to ``write`` (the kernel fixture's writer).
    """

    def __init__(self, write):
        self._write = write
        self._plan = {}
        self._count = collections.Counter()

    def fail(self, attribute, nth, err):
        self._plan[(attribute, self._count[attribute] + nth)] = err
        return self

    def __call__(self, path, data):
        attribute = os.path.basename(path)
        self._count[attribute] += 1
        err = self._plan.pop((attribute, self._count[attribute]), None)
        if err is not None:
            raise OSError(err, os.strerror(err), path)
        return self._write(path, data)


class _Device(object):
    def __init__(self, conn, dev):
        self._conn, self._dev = conn, dev

    def __getattr__(self, name):
        attr = getattr(self._dev, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self._conn._before('NodeDevice.' + name)
            return attr(*args, **kwargs)
        return call


class FaultyConnection(object):
    """A fake libvirt connection with planned faults.

    ``fail(method, nth, code)``: the ``nth`` call (1-based, from now) of
    ``method`` (``'listAllDevices'``, ``'NodeDevice.XMLDesc'``...) raises
    the fake's ``libvirtError``. ``drop_at(method, nth)``: at that call the
    fake host drops every connection (libvirtd died), so this call and all
    later ones on this connection fail.
    """

    def __init__(self, fake):
        self.fake = fake
        self._conn = fake.connect()
        self._count = collections.Counter()
        self._plan = {}

    def fail(self, method, nth=1, code=fakelibvirt.VIR_ERR_INTERNAL_ERROR):
        self._plan[(method, self._count[method] + nth)] = ('fail', code)
        return self

    def drop_at(self, method, nth=1):
        self._plan[(method, self._count[method] + nth)] = ('drop', None)
        return self

    def _before(self, method):
        self._count[method] += 1
        action = self._plan.pop((method, self._count[method]), None)
        if action is None:
            return
        kind, code = action
        if kind == 'drop':
            self.fake.drop_connections()
        else:
            raise fakelibvirt.libvirtError(
                'injected failure of %s' % method, code)

    def __getattr__(self, name):
        attr = getattr(self._conn, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self._before(name)
            result = attr(*args, **kwargs)
            if name == 'listAllDevices':
                return [_Device(self, d) for d in result]
            if isinstance(result, fakelibvirt.FakeNodeDevice):
                return _Device(self, result)
            return result
        return call


def compute_on(fixture, writer=None, conn=None, libvirt_backend=False,
               store=None):
    """A new ComputeHost (a service start) on ``fixture``'s host and state.

    ``writer`` replaces the sysfs writer, ``conn`` the libvirt connection
    (a :class:`FaultyConnection`), ``store`` the fixture's store;
    ``libvirt_backend`` manages mdevs through libvirt node devices instead
    of sysfs.
    """
    conn = conn if conn is not None else fixture.fake.connect()
    host = host_mod.Host(conn, nodename=fixture.hostname,
                         reconnect=fixture.fake.connect,
                         libvirt=fixture.fake.libvirt)
    if libvirt_backend:
        backend = mdev_libvirt.LibvirtNodeDeviceBackend(
            conn, libvirt=host.libvirt, current=host.live_connection)
    else:
        backend = mdev_sysfs.SysfsBackend(
            fixture.tree.root, writer=writer or fixture.kernel.write)
    fixture.compute = compute_mod.ComputeHost(
        host, fixture.settings, store or fixture.store,
        mdev.MdevManager(backend),
        host.numa_topology())
    return fixture.compute


def flavor(compute, **specs):
    return flavor_mod.parse(specs, compute.settings.aliases)


def vgpus(compute, count):
    return flavor(compute, **{'pci_passthrough:alias': 'vgpu:%d' % count})


def store_dump(path):
    """Every row of the state file, read beside the product's connection."""
    conn = sqlite3.connect(path)
    try:
        return {table: conn.execute('SELECT * FROM %s ORDER BY 1'
                                    % table).fetchall()
                for table in ('devices', 'instances', 'store_info')}
    finally:
        conn.close()


def libvirt_mdevs(fake):
    """{uuid: (parent address, type, active, persistent)} of the fake."""
    return {d.uuid: (fake.devices[d.parent].address, d.mdev_type,
                     bool(d.active), bool(d.persistent))
            for d in fake.devices.values() if d.kind == 'mdev'}


def held(compute):
    """{instance: sorted addresses} of busy devices, after a sync."""
    out = {}
    for dev in compute.snapshot().devices:
        if dev.status in BUSY:
            out.setdefault(dev.instance_uuid, []).append(dev.address)
    return {k: sorted(v) for k, v in out.items()}


def unusable_mdevs(compute, mdevs):
    """mdevs of ``mdevs`` ({uuid: ...}) the tracker neither holds for an
    instance nor offers as a slot: capacity leaked for good."""
    tracked = {d.address: d for d in compute.snapshot().devices}
    return sorted(u for u in mdevs if u not in tracked)


ERRNOS = (('EBUSY', errno_mod.EBUSY), ('ENOSPC', errno_mod.ENOSPC),
          ('EACCES', errno_mod.EACCES))
