"""nova-pci-mdev: mdevs through Nova's PCI passthrough framework.

The public API (every other module may change between releases)::

    import nova_pci_mdev

    settings = nova_pci_mdev.load_settings(['/etc/nova/nova.conf'])
    with nova_pci_mdev.open_compute_host(
            'qemu:///system', '/var/lib/nova-pci-mdev', settings) as host:
        flavor = nova_pci_mdev.parse_flavor(
            {'pci_passthrough:alias': 'vGPU:1'}, settings)
        print(host.claim(instance_uuid, flavor).devices_xml())

:class:`ComputeHost` is what a host offers: ``claim``, ``release``,
``sync``, ``snapshot``, ``provider_tree``, ``host_problems`` and the live
moves (``live_move_source``, ``claim_live_move``, ``confirm_move``). Every
error raised on purpose is a :class:`NovaPciMdevException` whose message
names the option or field, the value and the rule.

Importing the package imports nothing else: each function imports what it
needs when first called (oslo.versionedobjects and libvirt take about a
second), so that the command line's ``--help`` answers at once.
"""

from nova_pci_mdev.exception import NovaPciMdevException

__all__ = ('ComputeHost', 'Hypervisor', 'NovaPciMdevException',
           'load_settings', 'open_compute_host', 'parse_flavor')


def load_settings(config_files):
    """The validated configuration of nova.conf files (later files win):
    :class:`~nova_pci_mdev.conf.settings.Settings`. Raises ConfigErrors
    naming every problem at once."""
    from nova_pci_mdev import conf
    return conf.load_settings(conf.new_config(list(config_files)))


def open_compute_host(connection, state_dir, settings, hypervisor=None):
    """The :class:`ComputeHost` of ``connection`` (a libvirt URI such as
    ``qemu:///system`` or ``test:///path/host.xml``) whose state lives in
    the directory ``state_dir`` (created when missing; one per host), with
    ``settings`` from :func:`load_settings`. ``hypervisor``: a
    :class:`Hypervisor` to run on instead of connecting (tests). Close it
    (``close()`` or ``with``) to close its store."""
    from nova_pci_mdev import objects
    from nova_pci_mdev.compute import wiring
    objects.register_all()
    return wiring.open_compute_host(connection, state_dir, settings,
                                    hypervisor)


def parse_flavor(extra_specs, settings):
    """What a flavor's extra specs (a dict) ask of a host's devices, read
    with the aliases of ``settings``: the argument of
    :meth:`ComputeHost.claim`."""
    from nova_pci_mdev.compute import flavor
    return flavor.parse(extra_specs, settings.aliases)


def __getattr__(name):
    """:class:`ComputeHost` and :class:`Hypervisor`, imported when first
    named."""
    if name == 'ComputeHost':
        from nova_pci_mdev.compute import host
        return host.ComputeHost
    if name == 'Hypervisor':
        from nova_pci_mdev.compute import wiring
        return wiring.Hypervisor
    raise AttributeError('module %r has no attribute %r' % (__name__, name))
