"""Named worlds: compute hosts the functional tests run on.

One nova.conf (:data:`NOVA_CONF`) serves every world. A :class:`Kind` is
the device kind a scenario runs for; it builds a *family* (a parent and its
children) on a host, so that the SR-IOV scenarios are written once:

==================  ============================  ===========================
kind                parent (alias ``parent``)     children (alias ``child``)
==================  ============================  ===========================
``vf``              X710 PF 8086:1572 (type-PF)   VFs 8086:154c (type-VF)
``mdev``            T4 GPU 10de:1eb8 (mdev-pf)    nvidia-35 slots (mdev-vf)
``mdev-libvirt``    as ``mdev``, but the host is a libvirt test-driver host
                    file discovered through the real libvirt library
``vgpu-vf``         L40S GPU 10de:26b9 (type-PF,  VFs 10de:26b9 (type-VF)
                    NVIDIA vendor-specific VFIO;  taking nvidia-1150 (L40S-4Q)
                    never passed through whole)   in nvidia/current_vgpu_type
==================  ============================  ===========================

The ``vgpu`` alias is one name for two entries (ORed, as in Nova): the
nvidia-35 mdevs of a T4 and the nvidia-1150 VFs of an L40S, so a flavor
asking for ``vgpu:1`` reads the same on both kinds of GPU. Scenarios that
pass a parent through whole run on :data:`WHOLE_SCENARIOS` (not for
``vgpu-vf``: its PF is in no pool, see ``test_vgpu_vf.WholePfTest``).
"""

import dataclasses

from nova_pci_mdev.objects import fields
from nova_pci_mdev.tests.fixtures import fakelibvirt as fake
from nova_pci_mdev.tests.fixtures import nvidia_sysfs
from nova_pci_mdev.tests.functional import harness

DevType = fields.PciDeviceType

NOVA_CONF = """
[pci]
device_spec = {"vendor_id": "8086", "product_id": "1572"}
device_spec = {"vendor_id": "8086", "product_id": "154c"}
device_spec = {"vendor_id": "10de"}
device_spec = {"vendor_id": "15b3"}
alias = {"name": "vf", "vendor_id": "8086", "product_id": "154c", \
"device_type": "type-VF"}
alias = {"name": "pf", "vendor_id": "8086", "product_id": "1572", \
"device_type": "type-PF"}
alias = {"name": "vgpu", "vendor_id": "10de", "mdev_type": "nvidia-35"}
alias = {"name": "vgpu", "vendor_id": "10de", "mdev_type": "nvidia-1150"}
alias = {"name": "gpu", "vendor_id": "10de", "device_type": "mdev-pf"}
alias = {"name": "mlx5", "vendor_id": "15b3", "mdev_type": "mlx5_core-local"}

[devices]
enabled_mdev_types = nvidia-35, mlx5_core-local, nvidia-1150

[mdev_mlx5_core-local]
mdev_class = mlx5
"""

MDEV_TYPE = 'nvidia-35'
MLX5_TYPE = 'mlx5_core-local'
VGPU_VF_TYPE = 'nvidia-1150'


@dataclasses.dataclass(frozen=True)
class Kind:
    """A device kind: how to build its families and how to ask for them."""

    name: str
    child_alias: str
    parent_alias: str
    child_type: str
    parent_type: str
    hypervisor: str = harness.FAKE
    #: The parent can be passed through whole (not an NVIDIA vGPU GPU).
    whole_ok: bool = True

    @property
    def is_mdev(self):
        return self.child_type == DevType.MDEV_VF

    @property
    def is_vgpu_vf(self):
        return not self.whole_ok

    def add_family(self, host, address, numa_node, children):
        """A parent at ``address`` on ``numa_node`` with ``children``."""
        if self.is_vgpu_vf:
            host.add_sriov_pf(address, children, numa_node=numa_node,
                              vendor='10de', product='26b9',
                              vf_product='26b9', class_code='0x030200',
                              driver='nvidia', vf_addresses=nvidia_sysfs.
                              vf_addresses(address, children))
        elif self.is_mdev:
            host.add_mdev_parent(address, numa_node=numa_node,
                                 types={MDEV_TYPE: children})
        else:
            host.add_sriov_pf(address, children, numa_node=numa_node)
        return host

    def flavor(self, count=1, policy=None, numa_nodes=None, whole=False):
        """Extra specs asking for ``count`` children (or parents).

        A whole parent of a kind that cannot be passed through whole is a
        test bug (ValueError): such tests run on :data:`WHOLE_SCENARIOS`
        (the story of the vGPU PF is ``test_vgpu_vf.WholePfTest``)."""
        if whole and not self.whole_ok:
            raise ValueError('kind %s: the PF of an NVIDIA vGPU GPU cannot '
                             'be passed through whole' % self.name)
        specs = {'pci_passthrough:alias': '%s:%d' % (
            self.parent_alias if whole else self.child_alias, count)}
        if policy is not None:
            specs['hw:pci_numa_affinity_policy'] = policy
        if numa_nodes is not None:
            specs['hw:numa_nodes'] = str(numa_nodes)
        return specs


VF = Kind('vf', 'vf', 'pf', DevType.SRIOV_VF, DevType.SRIOV_PF)
MDEV = Kind('mdev', 'vgpu', 'gpu', DevType.MDEV_VF, DevType.MDEV_PF)
MDEV_LIBVIRT = Kind('mdev-libvirt', 'vgpu', 'gpu', DevType.MDEV_VF,
                    DevType.MDEV_PF, hypervisor=harness.TEST_DRIVER)
VGPU_VF = Kind('vgpu-vf', 'vgpu', 'l40s-pf', DevType.SRIOV_VF,
               DevType.SRIOV_PF, whole_ok=False)
KINDS = (VF, MDEV, MDEV_LIBVIRT, VGPU_VF)
#: testscenarios scenarios: the device kind shows in every test id.
SCENARIOS = [(k.name, {'kind': k}) for k in KINDS]
#: The scenarios of the kinds whose parent can be passed through whole.
WHOLE_SCENARIOS = [(k.name, {'kind': k}) for k in KINDS if k.whole_ok]

PARENT_0 = '0000:81:00.0'
PARENT_1 = '0000:82:00.0'


def two_hosts(cloud, kind, children=2, **fake_args):
    """Two identical hosts, one family per NUMA cell::

        host1                                 host2
        +----------------------------------+  +-----------------------+
        | cell 0 (socket 0) cell 1 (sock 1)|  | same as host1         |
        |                                  |  |                       |
        | P 0000:81:00.0    P 0000:82:00.0 |  | P 0000:81:00.0  ...   |
        |   C  C              C  C         |  |   C  C                |
        +----------------------------------+  +-----------------------+

        P = parent (X710 PF, or T4 GPU), C = child (VF, or nvidia-35 slot);
        ``children`` per parent (2 by default).

    ``fake_args`` go to both FakeHosts (e.g. libvirt and QEMU versions).
    Returns the hosts (SimHost) in name order.
    """
    hosts = []
    for name in ('host1', 'host2'):
        host = fake.FakeHost(name, cells=2, **fake_args)
        kind.add_family(host, PARENT_0, 0, children)
        kind.add_family(host, PARENT_1, 1, children)
        hosts.append(cloud.add_host(host, kind.hypervisor))
    return hosts


def numa_host(cloud, name, kind, families):
    """A host with 4 NUMA cells on 2 sockets and the given families::

        socket 0                     socket 1
        +-------------+-------------+-------------+-------------+
        | cell 0      | cell 1      | cell 2      | cell 3      |
        | cpus 0-1    | cpus 2-3    | cpus 4-5    | cpus 6-7    |
        +-------------+-------------+-------------+-------------+
          families: [(numa node or None, children), ...], parents at
          0000:81:00.0, 0000:82:00.0, ... in that order

    A family on node None has no NUMA affinity (libvirt reports no node).
    """
    host = fake.FakeHost(name, cells=0).set_numa_cells(
        [(cell, cell // 2, (2 * cell, 2 * cell + 1), 4 * 1024 * 1024)
         for cell in range(4)])
    for index, (node, children) in enumerate(families):
        kind.add_family(host, '0000:%02x:00.0' % (0x81 + index), node,
                        children)
    return cloud.add_host(host, kind.hypervisor)


GPU_ADDR, NIC_ADDR, MLX_ADDR = '0000:81:00.0', '0000:83:00.0', '0000:85:00.0'


def _gpu(host, node, slots):
    host.add_mdev_parent(GPU_ADDR, numa_node=node, types={MDEV_TYPE: slots})


def _mlx(host, node, slots):
    host.add_mdev_parent(MLX_ADDR, numa_node=node, vendor='15b3',
                         product='101d', class_code='0x020000',
                         driver='mlx5_core', types={MLX5_TYPE: slots})


def _nic(host, node, vfs):
    host.add_sriov_pf(NIC_ADDR, vfs, numa_node=node)


#: (name prefix, number of hosts, builder) of :func:`fleet`.
FLEET = (
    ('gpu', 6, lambda h: _gpu(h, 0, 1)),
    ('mlx', 5, lambda h: _mlx(h, 1, 1)),
    ('nic', 5, lambda h: _nic(h, 0, 1)),
    ('mix', 4, lambda h: (_gpu(h, 0, 1), _mlx(h, 1, 1), _nic(h, 1, 1))),
)


def fleet(cloud):
    """20 hosts with mixed GPUs, mlx5 parents and NICs (2 NUMA cells)::

        gpu-01 .. gpu-06   cell 0: T4 0000:81:00.0   nvidia-35 x1   (VGPU)
        mlx-01 .. mlx-05   cell 1: mlx5 0000:85:00.0 mlx5_core-local x1
                                                     (CUSTOM_MLX5)
        nic-01 .. nic-05   cell 0: X710 PF 0000:83:00.0 + 1 VF
        mix-01 .. mix-04   cell 0: T4 nvidia-35 x1
                           cell 1: mlx5 x1, X710 PF + 1 VF

        capacity: VGPU 10 slots, CUSTOM_MLX5 9 slots, VFs 9
        Placement: 20 root providers + 19 child providers

    Returns the hosts in name order.
    """
    hosts = []
    for prefix, count, build in FLEET:
        for index in range(1, count + 1):
            host = fake.FakeHost('%s-%02d' % (prefix, index), cells=2)
            build(host)
            hosts.append(cloud.add_host(host))
    return hosts


def gpu_pair(cloud):
    """Two hosts for the Placement path, each::

        gpuhost1 / gpuhost2
        +--------------------------------+--------------------------------+
        | cell 0                         | cell 1                         |
        | T4 0000:81:00.0 nvidia-35 x2   | mlx5 0000:85:00.0 x2           |
        |   provider ..._pci_0000_81_00_0|   provider ..._pci_0000_85_00_0|
        |   VGPU: 2                      |   CUSTOM_MLX5: 2               |
        +--------------------------------+--------------------------------+

    Returns the hosts in name order.
    """
    hosts = []
    for name in ('gpuhost1', 'gpuhost2'):
        host = fake.FakeHost(name, cells=2)
        _gpu(host, 0, 2)
        _mlx(host, 1, 2)
        hosts.append(cloud.add_host(host))
    return hosts


#: An A100-like GPU's type and the nova.conf of :func:`sriov_gpu_host`:
#: :data:`NOVA_CONF` with it enabled and an alias for the PF whole.
SRIOV_GPU_TYPE = 'nvidia-699'
SRIOV_GPU_PRODUCT = '20b5'
SRIOV_GPU_NOVA_CONF = NOVA_CONF.replace(
    'enabled_mdev_types = nvidia-35,',
    'enabled_mdev_types = %s, nvidia-35,' % SRIOV_GPU_TYPE).replace(
    'alias = {"name": "gpu",',
    'alias = {"name": "a100", "vendor_id": "10de", "product_id": "%s", '
    '"device_type": "type-PF"}\nalias = {"name": "gpu",'
    % SRIOV_GPU_PRODUCT)
SRIOV_GPU_PFS = ('0000:41:00.0', '0000:42:00.0')


def sriov_gpu_host(cloud, name='a100-host', vfs=4):
    """A host with two A100-like SR-IOV GPUs, one per NUMA cell, whose VFs
    are the mdev parents (one nvidia-699 instance each; three levels)::

        cell 0                               cell 1
        PF 0000:41:00.0 (type-PF)            PF 0000:42:00.0 (type-PF)
          VF parents 0000:41:00.4 .. .7        VF parents 0000:42:00.4 ..
          (mdev-pf, 1 slot to create each)
          provider <name>_pci_0000_41_00_0     provider ..._0000_42_00_0
          VGPU: vfs                            VGPU: vfs

    Placement gets one provider per GPU (not one per VF parent). The cloud
    should run :data:`SRIOV_GPU_NOVA_CONF`. Returns the host (SimHost).
    """
    host = fake.FakeHost(name, cells=2)
    for node, address in enumerate(SRIOV_GPU_PFS):
        host.add_sriov_gpu(address, vfs, {SRIOV_GPU_TYPE: 1},
                           numa_node=node, product=SRIOV_GPU_PRODUCT)
    return cloud.add_host(host)


# -- live migration ------------------------------------------------------------

#: libvirt 10.0.0 and QEMU 8.2.2: new enough to live-migrate mdevs (8.6.0 /
#: 8.1.0) and PCI devices with vfio-pci variant drivers (10.0.0 / 8.2.2).
LIVE_VERSIONS = {'lib_version': 10000000, 'hv_version': 8002002}
#: :data:`NOVA_CONF` with the X710 VFs and the L40S VFs marked
#: live-migratable, and the ``vgpu`` alias ORing nvidia-36 and nvidia-1160
#: (L40S-4A; both enabled too, after the types the GPUs expose): a guest
#: booted with an nvidia-35 (nvidia-1150) vGPU must keep it when it moves,
#: although the alias would accept an nvidia-36 (nvidia-1160) one at boot.
LIVE_NOVA_CONF = NOVA_CONF.replace(
    'device_spec = {"vendor_id": "8086", "product_id": "154c"}',
    'device_spec = {"vendor_id": "8086", "product_id": "154c", '
    '"live_migratable": true}').replace(
    'device_spec = {"vendor_id": "10de"}',
    'device_spec = {"vendor_id": "10de", "product_id": "26b9", '
    '"live_migratable": true}\ndevice_spec = {"vendor_id": "10de"}').replace(
    'alias = {"name": "gpu",',
    'alias = {"name": "vgpu", "vendor_id": "10de", "mdev_type": '
    '"nvidia-36"}\nalias = {"name": "vgpu", "vendor_id": "10de", '
    '"mdev_type": "nvidia-1160"}\nalias = {"name": "gpu",').replace(
    'enabled_mdev_types = nvidia-35, mlx5_core-local, nvidia-1150',
    'enabled_mdev_types = nvidia-35, mlx5_core-local, nvidia-1150, '
    'nvidia-36, nvidia-1160')
#: The kinds the live-migration scenarios run for.
LIVE_KINDS = (VF, MDEV, VGPU_VF)
LIVE_SCENARIOS = [(k.name, {'kind': k}) for k in LIVE_KINDS]
LIVE_WHOLE_SCENARIOS = [(k.name, {'kind': k}) for k in LIVE_KINDS
                        if k.whole_ok]


def live_pair(cloud, kind, children=2):
    """:func:`two_hosts` on :data:`LIVE_VERSIONS` (the cloud should run
    :data:`LIVE_NOVA_CONF`)."""
    return two_hosts(cloud, kind, children, **LIVE_VERSIONS)


def host_without_live_type(cloud, kind, name='host3', children=2):
    """A third host, like host1, whose children cannot take the kind's
    live moves::

        vf:   the same X710 PF + VFs on cells 0 and 1, but this host's
              device_spec does not mark them live_migratable (NOVA_CONF)
        mdev: T4 GPUs on cells 0 and 1 that expose nvidia-36 only, so
              there is no nvidia-35 slot
        vgpu-vf: L40S GPUs on cells 0 and 1 whose live-migratable VFs
              take nvidia-1160 (this host's [mdev_nvidia-1160]
              device_addresses), so there is no nvidia-1150 slot
    """
    host = fake.FakeHost(name, cells=2, **LIVE_VERSIONS)
    if kind.is_vgpu_vf:
        kind.add_family(host, PARENT_0, 0, children)
        kind.add_family(host, PARENT_1, 1, children)
        return cloud.add_host(host, kind.hypervisor, nova_conf=(
            LIVE_NOVA_CONF + '\n[mdev_nvidia-1160]\ndevice_addresses = '
            '%s, %s\n' % (PARENT_0, PARENT_1)))
    if kind.is_mdev:
        for address, node in ((PARENT_0, 0), (PARENT_1, 1)):
            host.add_mdev_parent(address, numa_node=node,
                                 types={'nvidia-36': children})
        return cloud.add_host(host, kind.hypervisor)
    kind.add_family(host, PARENT_0, 0, children)
    kind.add_family(host, PARENT_1, 1, children)
    return cloud.add_host(host, kind.hypervisor, nova_conf=NOVA_CONF)
