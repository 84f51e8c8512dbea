"""The bundled sample host and its nova.conf (package data).

``sample_host.xml`` is a host file for libvirt's test driver (open it with
:func:`sample_connection_uri`); ``sample_host_topology.json`` is its
sidecar (compute node name, NUMA cells, virtual mdev parents the test
driver cannot hold); ``nova.conf`` configures every kind of device on it.
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
SAMPLE_HOST_XML = os.path.join(DATA_DIR, 'sample_host.xml')
SAMPLE_HOST_TOPOLOGY = os.path.join(DATA_DIR, 'sample_host_topology.json')
SAMPLE_NOVA_CONF = os.path.join(DATA_DIR, 'nova.conf')


def sample_connection_uri():
    """``test:///<absolute path>/sample_host.xml``."""
    return 'test://' + SAMPLE_HOST_XML
