"""``[devices]`` options and the dynamic ``[mdev_<type>]`` groups.

``[devices] enabled_mdev_types`` (deprecated ``enabled_vgpu_types``) lists
the mdev types the host may create; each type has a group
``[mdev_<type>]`` (deprecated ``[vgpu_<type>]``) with ``device_addresses``,
``mdev_class`` and ``max_instances``.

Invariants: options are registered on the ConfigOpts passed in; a dynamic
group is registered only for a type name that is safe as a sysfs path
component; registering twice is harmless. The options carry no range or
pattern checks: :mod:`nova_pci_mdev.conf.mdev` validates them and reports
every problem at once.
"""

from oslo_config import cfg

from nova_pci_mdev import exception
from nova_pci_mdev import names

devices_group = cfg.OptGroup(
    name='devices', title='physical or virtual device options')

mdev_opts = [
    cfg.ListOpt(
        'enabled_mdev_types',
        default=[],
        deprecated_name='enabled_vgpu_types',
        help='The mdev types this host may create. Each type can be '
             'configured in a [mdev_<type>] group (old name '
             '[vgpu_<type>]). A parent exposes the type whose '
             'device_addresses lists it, else the first enabled type '
             'without device_addresses that it supports.'),
]

GROUP_PREFIX = 'mdev_'
DEPRECATED_GROUP_PREFIX = 'vgpu_'


def group_name(mdev_type):
    return GROUP_PREFIX + mdev_type


def dynamic_opts(mdev_type):
    old = DEPRECATED_GROUP_PREFIX + mdev_type
    return [
        cfg.ListOpt('device_addresses', default=[], deprecated_group=old,
                    help='Parent devices (PCI addresses or virtual parent '
                         'names such as mtty) that expose this type.'),
        cfg.StrOpt('mdev_class', default='VGPU', deprecated_group=old,
                   help='Class of the mediated devices: VGPU, or letters, '
                        'digits and "_" (at most 248) giving the Placement '
                        'resource class CUSTOM_<CLASS>.'),
        cfg.IntOpt('max_instances', default=None, deprecated_group=old,
                   help='How many mdevs of this type the host may have, '
                        'existing ones included (a positive integer; '
                        'default: what the parents report), as in Nova: '
                        'the limit of the Placement path. A limit per '
                        'parent is the [pci] device_spec key max_instances; '
                        'without one for this type, the former per-parent '
                        'reading is kept where it differs (deprecated).'),
    ]


def safe_get(conf, group, name):
    """``(value, None)``, or ``(None, reason)`` when oslo.config cannot
    read the option (an int that does not parse, a ``$name`` that names no
    option: oslo.config substitutes ``$`` references when reading)."""
    try:
        return conf[group][name], None
    except ValueError as exc:
        return None, str(exc).rpartition(' is not valid: ')[2]
    except cfg.Error as exc:
        return None, ('cannot be read (%s); write "$$" for a literal "$"'
                      % exc)


def register_opts(conf):
    conf.register_group(devices_group)
    conf.register_opts(mdev_opts, group=devices_group)


def register_dynamic_opts(conf):
    """Register ``[mdev_<type>]`` for every safe enabled type."""
    enabled, _error = safe_get(conf, 'devices', 'enabled_mdev_types')
    for mdev_type in enabled or ():
        try:
            names.validate_mdev_type(mdev_type)
        except exception.Invalid:
            continue
        for opt in dynamic_opts(mdev_type):
            conf.register_opt(opt, group=group_name(mdev_type))


def list_opts():
    return {devices_group: mdev_opts}
