"""What every command of ``nova-pci-mdev`` shares: exit codes, the settings
and the compute host of its options (through the public API,
:mod:`nova_pci_mdev`).

Commands import the modules that pull in oslo.versionedobjects (and with it
oslo.messaging and eventlet, about a second) in their own bodies, so that
``--help`` and argument errors answer at once; this module imports none of
them at the top.
"""

import nova_pci_mdev

EXIT_OK, EXIT_UNSATISFIED, EXIT_INVALID, EXIT_HOST = 0, 1, 2, 3


def register_objects():
    from nova_pci_mdev import objects
    objects.register_all()


def build_compute_host(args, settings):
    """:func:`nova_pci_mdev.open_compute_host` of the options ``args``."""
    # Kept on args so that main() can report what discovery left out.
    args.compute = nova_pci_mdev.open_compute_host(
        args.connection, args.state_dir, settings)
    return args.compute


def load_settings(args):
    """:func:`nova_pci_mdev.load_settings` of ``--config-file``."""
    return nova_pci_mdev.load_settings(args.config_file)
