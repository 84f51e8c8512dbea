"""``[pci]`` options, with Nova's names and deprecated names.

Invariant: options are registered on the ConfigOpts passed in (never on a
global CONF) and carry no validation of their own: the raw strings are
parsed by :mod:`nova_pci_mdev.pci.whitelist` and
:mod:`nova_pci_mdev.pci.request`, which report every problem at once.
"""

from oslo_config import cfg

pci_group = cfg.OptGroup(name='pci', title='PCI passthrough options')

pci_opts = [
    cfg.MultiStrOpt(
        'alias',
        default=[],
        deprecated_name='pci_alias',
        deprecated_group='DEFAULT',
        help='A PCI alias as a JSON object: "name" and any of "vendor_id", '
             '"product_id" (4 hex digits), "device_type" (type-PCI, '
             'type-PF, type-VF, vdpa, mdev-pf, mdev-vf), "mdev_type", '
             '"numa_policy" (required, legacy, preferred, socket), '
             '"live_migratable". Same-name aliases are ORed. An alias with '
             '"mdev_type" and no "device_type" asks for mdev-vf slots. '
             'Repeat the option for several aliases.'),
    cfg.MultiStrOpt(
        'device_spec',
        default=[],
        deprecated_opts=[
            cfg.DeprecatedOpt('passthrough_whitelist', group='pci'),
            cfg.DeprecatedOpt('pci_passthrough_whitelist', group='DEFAULT'),
        ],
        help='The devices guests may use, as a JSON object or list of '
             'objects with any of "vendor_id", "product_id" (hex or "*"), '
             '"address" (glob "[[[domain]:]bus]:][slot][.[function]]", a '
             'dict of regexes "domain", "bus", "slot", "function", an mdev '
             'parent name or UUID), "devname", "mdev_type" (name or glob) '
             'and string tags ("physical_network", "trusted", ...). An '
             'entry that matches a parent (type-PF, mdev-pf) also covers '
             'its children.'),
]


def register_opts(conf):
    conf.register_group(pci_group)
    conf.register_opts(pci_opts, group=pci_group)


def list_opts():
    return {pci_group: pci_opts}
