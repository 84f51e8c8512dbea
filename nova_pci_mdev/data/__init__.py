"""The bundled sample host and its nova.conf (package data).

``sample_host.xml`` is a host file for libvirt's test driver (open it with
:func:`sample_connection_uri`); ``sample_host_topology.json`` is its
sidecar (compute node name, NUMA cells, virtual mdev parents the test
driver cannot hold); ``nova.conf`` configures every kind of device on it.

``l40s_host.xml`` is a second host: one NVIDIA L40S whose vGPUs are SR-IOV
VFs (NVIDIA's vendor-specific VFIO framework, no mdevs); its sidecar names
``l40s_sysfs/``, the VFs' ``nvidia/`` sysfs directories and the catalogue of
the emulated driver; ``l40s_nova.conf`` asks for its vGPUs with the same
kind of alias as the mdev GPUs of the first host.
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
SAMPLE_HOST_XML = os.path.join(DATA_DIR, 'sample_host.xml')
SAMPLE_HOST_TOPOLOGY = os.path.join(DATA_DIR, 'sample_host_topology.json')
SAMPLE_NOVA_CONF = os.path.join(DATA_DIR, 'nova.conf')
L40S_HOST_XML = os.path.join(DATA_DIR, 'l40s_host.xml')
L40S_HOST_TOPOLOGY = os.path.join(DATA_DIR, 'l40s_host_topology.json')
L40S_SYSFS = os.path.join(DATA_DIR, 'l40s_sysfs')
L40S_NOVA_CONF = os.path.join(DATA_DIR, 'l40s_nova.conf')


def sample_connection_uri():
    """``test:///<absolute path>/sample_host.xml``."""
    return 'test://' + SAMPLE_HOST_XML


def l40s_connection_uri():
    """``test:///<absolute path>/l40s_host.xml``."""
    return 'test://' + L40S_HOST_XML
