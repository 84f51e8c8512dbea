"""What every command of ``nova-pci-mdev`` shares: exit codes, the settings
and the compute host of its options.

Commands import the modules that pull in oslo.versionedobjects (and with it
oslo.messaging and eventlet, about a second) in their own bodies, so that
``--help`` and argument errors answer at once; this module imports none of
them at the top.
"""

EXIT_OK, EXIT_UNSATISFIED, EXIT_INVALID, EXIT_HOST = 0, 1, 2, 3


def register_objects():
    from nova_pci_mdev import objects
    objects.register_all()


def build_compute_host(args, settings):
    """:func:`nova_pci_mdev.cmd.wiring.build_compute_host`, imported when a
    command runs (it pulls in the whole library)."""
    from nova_pci_mdev.cmd import wiring
    # Kept on args so that main() can report what discovery left out.
    args.compute = wiring.build_compute_host(args, settings)
    return args.compute


def load_settings(args):
    from nova_pci_mdev import conf as conf_mod
    cfg = conf_mod.new_config(args.config_file)
    return conf_mod.load_settings(cfg)
