"""Simulated compute hosts for the functional tests.

A :class:`SimHost` is one compute host as the product code sees it: a
libvirt connection, an mdev lifecycle backend, a SQLite store in the host's
own state directory and a :class:`~nova_pci_mdev.compute.host.ComputeHost`
opened on them through the public API (:func:`nova_pci_mdev.
open_compute_host`), as the CLI opens its hosts. The host is
described once by a :class:`~..fixtures.fakelibvirt.FakeHost`
builder and runs on one of two hypervisors:

``fake`` (:data:`FAKE`)
    The FakeHost connection is the host's ``qemu:///system``; a
    :class:`~..fixtures.sysfs.SysfsTree` in the state directory is its
    kernel, driven by the real :class:`~nova_pci_mdev.virt.libvirt.
    mdev_sysfs.SysfsBackend` through the tree's writer. :class:`Udev`
    relays what the kernel did to the fake libvirt (a new mdev appears as a
    node device, a removed one goes away and gives its instance back), as
    udev does on a real host, so discovery sees the mdevs the backend made.
``libvirt-test`` (:data:`TEST_DRIVER`)
    The real libvirt library: the FakeHost is written out as a host XML
    file for libvirt's ``test:///<file>`` driver plus the project's sidecar
    (NUMA cells, virtual parents), and opened through
    :class:`~nova_pci_mdev.virt.libvirt.emulated.host.EmulatedHost`, whose
    emulated backend keeps the mdevs (the test driver cannot create any).

Lifecycle: :meth:`SimHost.start` (service start: new connection, new store
handle, new ComputeHost on the same state), :meth:`SimHost.stop`,
:meth:`SimHost.crash` (host down: connections die, nothing may reach the
host until :meth:`SimHost.start`), :meth:`SimHost.reboot` (every mdev
vanishes, then the service starts and syncs). While a host is down,
:attr:`SimHost.compute` raises :class:`HostDown`, so a test can prove that a
down host was never contacted.

:class:`GuestValidator` hands every guest XML to the real libvirt test
driver with ``VIR_DOMAIN_DEFINE_VALIDATE`` (libvirt's schema and parser).
"""

import dataclasses
import json
import os

import libvirt

import nova_pci_mdev
from nova_pci_mdev.objects import fields
from nova_pci_mdev.pci import capacity
from nova_pci_mdev.tests.fixtures import nvidia_sysfs
from nova_pci_mdev.tests.fixtures import sysfs
from nova_pci_mdev.virt.libvirt import config as vconfig
from nova_pci_mdev.virt.libvirt import host as host_mod
from nova_pci_mdev.virt.libvirt.emulated import host as emulated
from nova_pci_mdev.virt.libvirt.mdev import sysfs_backend as mdev_sysfs
from nova_pci_mdev.virt.libvirt.nvidia import sysfs as nvidia_sysfs_mod

FAKE = 'fake'
TEST_DRIVER = 'libvirt-test'
#: The URI a FAKE host stands for (its store's recorded connection).
FAKE_URI = 'qemu:///system'
HYPERVISORS = (FAKE, TEST_DRIVER)
DevType = fields.PciDeviceType
Status = fields.PciDeviceStatus
BUSY = (Status.CLAIMED, Status.ALLOCATED)
#: Key suffix of a parent's slots still to create in :meth:`state`.
CREATABLE = '+creatable'

libvirt.registerErrorHandler(lambda *args: None, None)


class HostDown(Exception):
    """Something tried to reach a compute host that is down."""

    def __init__(self, name):
        super().__init__('compute host %s is down: nothing may contact it'
                         % name)
        self.name = name


class GuestXMLInvalid(AssertionError):
    """libvirt refused a guest XML the product generated."""


# -- the fake host, seen by the kernel and by libvirt ----------------------

def mdev_parents(fake):
    """``{address: (virtual, {type: total instances})}`` of a FakeHost.

    The total counts the mdevs that exist plus ``availableInstances``.
    """
    used = {}
    for dev in fake.devices.values():
        if dev.kind == 'mdev' and dev.active:
            key = (fake.devices[dev.parent].address, dev.mdev_type)
            used[key] = used.get(key, 0) + 1
    parents = {}
    for dev in fake.devices.values():
        if dev.types is None or dev.kind == 'mdev':
            continue
        parents[dev.address] = (dev.kind == 'mdev_types', {
            kind: entry['available'] + used.get((dev.address, kind), 0)
            for kind, entry in dev.types.items()})
    return parents


def fake_mdevs(fake):
    """``{uuid: (parent address, type)}`` of the FakeHost's active mdevs."""
    return {dev.uuid: (fake.devices[dev.parent].address, dev.mdev_type)
            for dev in fake.devices.values()
            if dev.kind == 'mdev' and dev.active}


class Udev(object):
    """The kernel (a SysfsTree) and the fake libvirt kept in step.

    :meth:`write` is the SysfsBackend's writer: the kernel acts (or fails
    exactly where ``write(2)`` would) and whatever changed is relayed to
    libvirt. Invariant after every call: ``fake_mdevs(fake) ==
    tree.mdevs()``.
    """

    def __init__(self, fake, tree):
        self.fake = fake
        self.tree = tree
        #: uuid -> errno: the kernel refuses to create these mdevs (a
        #: persistent, UUID-specific failure; SysfsTree.fail_next is per
        #: attribute and one-shot).
        self.refuse = {}
        for address, (virtual, types) in sorted(mdev_parents(fake).items()):
            tree.add_parent(address, types, virtual=virtual)
        for uuid, (parent, mdev_type) in sorted(fake_mdevs(fake).items()):
            tree.add_mdev(uuid, parent, mdev_type)

    def write(self, path, data):
        err = self.refuse.get(data.strip().lower())
        if err is not None and os.path.basename(path) == 'create':
            raise OSError(err, os.strerror(err), path)
        try:
            self.tree.write(path, data)
        finally:
            self.relay()

    def relay(self):
        kernel = self.tree.mdevs()
        seen = fake_mdevs(self.fake)
        for uuid in sorted(kernel.keys() - seen.keys()):
            self.fake.add_mdev(uuid, *kernel[uuid])
        gone = sorted(seen.keys() - kernel.keys())
        if gone:
            conn = self.fake.connect()
            for uuid in gone:
                conn.nodeDeviceLookupByName(
                    self.fake.device_name(uuid)).destroy()


def write_test_driver_host(fake, directory):
    """Write ``fake`` as a libvirt test-driver host file and its sidecar.

    Returns the ``test:///...`` URI. Virtual parents go to the sidecar's
    ``extra_node_devices`` (libvirt <= 9 refuses them in a host file).
    """
    cpus = sum(len(cell[2]) for cell in fake.cells) or 1
    memory = sum(cell[3] for cell in fake.cells) or 1048576
    out = ['<node>', '<cpu><nodes>%d</nodes><sockets>1</sockets><cores>%d'
           '</cores><threads>1</threads><active>%d</active><mhz>2400</mhz>'
           '<model>x86_64</model></cpu>' % (max(len(fake.cells), 1), cpus,
                                            cpus),
           '<memory>%d</memory>' % memory]
    extra = []
    for dev in fake.devices.values():
        (extra if dev.kind == 'mdev_types' else out).append(
            fake.device_xml(dev))
    out.append('</node>')
    path = os.path.join(directory, 'host.xml')
    with open(path, 'w') as handle:
        handle.write('\n'.join(out))
    sidecar = {'hostname': fake.hostname,
               'cells': [{'id': c, 'socket': s, 'cpus': list(cpus_),
                          'memory_kb': mem}
                         for c, s, cpus_, mem in fake.cells],
               'extra_node_devices': extra}
    with open(emulated.sidecar_path(path), 'w') as handle:
        json.dump(sidecar, handle)
    return 'test://' + path


def nvidia_gpus(fake):
    """``{PF address: [VF addresses]}`` of the FakeHost's NVIDIA GPUs whose
    VFs are vGPUs (SR-IOV PFs of vendor 10de bound to ``nvidia``)."""
    return {dev.address: list(dev.vfs) for dev in fake.devices.values()
            if dev.kind == 'pci' and getattr(dev, 'vfs', None)
            and dev.vendor == '10de' and dev.driver == 'nvidia'}


def nvidia_tree(fake, root):
    """The NVIDIA VF sysfs tree (driver included) of ``fake``'s vGPU GPUs
    (the bundled L40S catalogue), or None when it has none."""
    gpus = nvidia_gpus(fake)
    if not gpus:
        return None
    tree = nvidia_sysfs.NvidiaSysfsTree(root)
    tree.setUp()
    for pf, vfs in sorted(gpus.items()):
        tree.add_gpu(pf, vfs=vfs)
    return tree


# -- one compute host --------------------------------------------------------

class SimHost(object):
    """One simulated compute host (see the module docstring).

    :param name: the compute node name (also the FakeHost's hostname).
    :param fake: the :class:`FakeHost` describing the hardware.
    :param settings: the validated configuration of the host.
    :param state_dir: an empty directory owned by this host.
    :param hypervisor: :data:`FAKE` or :data:`TEST_DRIVER`.
    """

    def __init__(self, name, fake, settings, state_dir,
                 hypervisor=FAKE):
        if hypervisor not in HYPERVISORS:
            raise ValueError('hypervisor must be one of %s, got %r'
                             % (HYPERVISORS, hypervisor))
        if fake.hostname != name:
            raise ValueError('FakeHost %s described as host %s'
                             % (fake.hostname, name))
        self.name = name
        self.fake = fake
        self.settings = settings
        self.state_dir = state_dir
        self.hypervisor = hypervisor
        self.tree = None
        self.udev = None
        self.nv = None      # NVIDIA vGPU VFs' sysfs tree, if the host has any
        self.uri = None
        if hypervisor == FAKE:
            self.tree = sysfs.SysfsTree(os.path.join(state_dir, 'root'))
            self.tree.setUp()
            self.udev = Udev(fake, self.tree)
            self.nv = nvidia_tree(fake, os.path.join(state_dir, 'nvidia'))
        else:
            self.uri = write_test_driver_host(fake, state_dir)
        self._compute = None
        self._conn = None
        self._store = None
        self.starts = 0

    # -- service lifecycle -------------------------------------------------

    @property
    def up(self):
        return self._compute is not None

    @property
    def compute(self):
        """The running ComputeHost; :class:`HostDown` while down."""
        if self._compute is None:
            raise HostDown(self.name)
        return self._compute

    def start(self):
        """Start the compute service: a new ComputeHost on the same state,
        opened through the public API (:func:`nova_pci_mdev.
        open_compute_host`) as the CLI opens its hosts."""
        if self.hypervisor == FAKE:
            conn = self.fake.connect()
            host = host_mod.Host(conn, nodename=self.name,
                                 libvirt=self.fake.libvirt)
            runs_on = nova_pci_mdev.Hypervisor(
                host, mdev_sysfs.SysfsBackend(self.tree.root,
                                              writer=self.udev.write),
                self._vf_sysfs())
            uri = FAKE_URI
        else:
            runs_on, uri = None, self.uri
        self._compute = nova_pci_mdev.open_compute_host(
            uri, self.state_dir, self.settings, runs_on)
        self._conn = self._compute.host.connection
        self._store = self._compute.store
        self.starts += 1
        return self._compute

    def _vf_sysfs(self):
        if self.nv is None:
            return None
        return nvidia_sysfs_mod.NvidiaVfSysfs(self.nv.root,
                                              writer=self.nv.write)

    def vgpu_types(self):
        """``{VF address: type id}`` the NVIDIA driver holds (its view)."""
        return self.nv.types() if self.nv is not None else {}

    def stop(self):
        """Stop the service cleanly (store and connection closed)."""
        if self._compute is None:
            return
        self._store.close()
        self._conn.close()
        self._compute = self._store = self._conn = None

    def crash(self):
        """The host goes down: every libvirt connection to it dies."""
        self.stop()
        if self.hypervisor == FAKE:
            self.fake.drop_connections()

    def restart_service(self):
        self.stop()
        return self.start()

    def reboot(self):
        """Power-cycle: every mdev vanishes; the service starts and syncs.

        Returns ``(SyncReport, RecreateReport)`` of the first sync.
        """
        self.stop()
        if self.hypervisor == FAKE:
            self.tree.reboot()
            self.udev.relay()
            if self.nv is not None:
                self.nv.reboot()
        else:
            backend = self._emulated_backend()
            for uuid in sorted(backend.list()):
                backend.remove(uuid)
        self.start()
        return self.compute.sync()

    def _emulated_backend(self):
        """The emulated mdevs of a test-driver host, read while it is off
        (what the kernel would hold)."""
        conn = libvirt.open(self.uri)
        try:
            sidecar = emulated.load_sidecar(emulated.sidecar_path(
                self.uri[len('test://'):]))
            return emulated.EmulatedHost(conn, self.state_dir, sidecar,
                                         nodename=self.name).backend
        finally:
            conn.close()

    # -- what the host holds, as the kernel and libvirt see it -------------

    def kernel_mdevs(self):
        """``{uuid: (parent, type)}`` of the mdevs that exist on the host."""
        if self.hypervisor == FAKE:
            return self.tree.mdevs()
        backend = (self.compute.mdevs.backend if self.up
                   else self._emulated_backend())
        return {uuid: (info.parent, info.mdev_type)
                for uuid, info in backend.list().items()}

    @property
    def keeps_domains(self):
        """True if guests can be defined on the host's own libvirt (the
        test driver forgets them when its connection closes)."""
        return self.hypervisor == FAKE

    def define_domain(self, xml):
        if self.keeps_domains:
            self.compute.host.connection.defineXMLFlags(xml)

    def domain_xml(self, name):
        """The XML libvirt gives for domain ``name`` (None when the host
        does not keep domains)."""
        if not self.keeps_domains:
            return None
        return self.compute.host.connection.lookupByName(name).XMLDesc(0)

    def undefine_domain(self, name):
        if self.keeps_domains and name in self.fake.domains:
            self.compute.host.connection.lookupByName(name).undefine()

    def domains(self):
        """``{domain name: guest config}`` defined on the host."""
        return {name: vconfig.LibvirtConfigGuest.parse_str(rec['xml'])
                for name, rec in self.fake.domains.items()}

    def contacts(self):
        """A counter that moves whenever anything reaches the host."""
        count = sum(self.fake.calls.values())
        if self.tree is not None:
            count += len(self.tree.writes)
        if self.nv is not None:
            count += len(self.nv.writes)
        return count

    def devices(self):
        """``{address: PciDevice}`` of the tracker, after a sync."""
        return {d.address: d for d in self.compute.snapshot().devices}

    def state(self):
        """``{address: (dev_type, status, instance_uuid)}`` of every
        tracked device, and ``{'<parent>+creatable': ('creatable', status,
        count)}`` for the slots a parent can still create (``available``
        while they can be claimed): the host's whole truth in one
        comparable value."""
        out = {}
        for address, dev in self.devices().items():
            out[address] = (dev.dev_type, dev.status, dev.instance_uuid)
            count = capacity.creatable(dev)
            if count:
                out[address + CREATABLE] = (
                    CREATABLE[1:], Status.AVAILABLE if capacity.usable(dev)
                    else Status.UNAVAILABLE, count)
        return out

    def capacity_view(self):
        """:meth:`state` with the free slots of each parent (free slot
        devices and slots still to create) as one count per parent: the
        same whichever of the two a free slot is."""
        out = {}
        for address, dev in self.devices().items():
            free = capacity.usable(dev)
            if (dev.dev_type == fields.PciDeviceType.MDEV_VF
                    and dev.status == Status.AVAILABLE and dev.parent_addr):
                address, free = dev.parent_addr, 1
            else:
                out[address] = (dev.dev_type, dev.status, dev.instance_uuid)
            key = address + ' free slots'
            out[key] = out.get(key, 0) + free
        return out

    def held(self):
        """``{consumer uuid: sorted addresses}`` of busy devices."""
        out = {}
        for address, dev in self.devices().items():
            if dev.status in BUSY:
                out.setdefault(dev.instance_uuid, []).append(address)
        return {k: sorted(v) for k, v in out.items()}


# -- guest XML through the real libvirt ----------------------------------------

class GuestValidator(object):
    """Validates guest XML with libvirt's test driver (schema + parser).

    Every :meth:`validate` defines the domain with
    ``VIR_DOMAIN_DEFINE_VALIDATE`` on ``test:///default``, reads libvirt's
    XML back, undefines it and returns the parsed config. ``count`` says how
    many guests went through.
    """

    def __init__(self):
        self.conn = libvirt.open('test:///default')
        self.count = 0

    def close(self):
        self.conn.close()

    def validate(self, guest):
        xml = dataclasses.replace(guest, virt_type='test').to_xml()
        try:
            dom = self.conn.defineXMLFlags(
                xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        except libvirt.libvirtError as exc:
            raise GuestXMLInvalid('libvirt refused the guest XML: %s\n%s'
                                  % (exc, xml))
        try:
            back = vconfig.LibvirtConfigGuest.parse_str(dom.XMLDesc(0))
        finally:
            dom.undefine()
        if back.hostdevs != list(guest.hostdevs):
            raise GuestXMLInvalid('libvirt read the hostdevs back as %s, '
                                  'expected %s' % (back.hostdevs,
                                                   guest.hostdevs))
        self.count += 1
        return back
