"""Configuration of nova-pci-mdev: Nova's option names, read with oslo.config.

Invariants: :func:`new_config` returns a fresh ConfigOpts (never a global
CONF) with every option registered, including the ``[mdev_<type>]`` groups
of the enabled types; unrelated sections and options of a real nova.conf
are ignored. :func:`validate` returns every problem of a configuration in
one run; :func:`load_settings` returns :class:`Settings` or raises
:class:`~nova_pci_mdev.exception.ConfigErrors` listing them all.
"""

from oslo_config import cfg

from nova_pci_mdev import exception
from nova_pci_mdev.conf import devices
from nova_pci_mdev.conf import mdev
from nova_pci_mdev.conf import pci
from nova_pci_mdev.conf import settings
from nova_pci_mdev.conf import validation

MdevTypeOptions = mdev.MdevTypeOptions
Settings = settings.Settings
load_settings = validation.load_settings
validate = validation.validate
resource_class_for = mdev.resource_class_for


def register_opts(conf):
    pci.register_opts(conf)
    devices.register_opts(conf)


def new_config(config_files=(), args=()):
    """A fresh ConfigOpts with all options, loaded from ``config_files``.

    ``args`` are command-line arguments (``--config-file PATH`` works).
    Unreadable or unparsable files raise ConfigErrors.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    files = [str(f) for f in config_files]
    try:
        conf(args=list(args), project='nova', prog='nova-pci-mdev',
             default_config_files=files, default_config_dirs=[],
             use_env=False)
    except cfg.ConfigFilesNotFoundError as exc:
        raise exception.ConfigErrors([exception.ConfigError(
            group='-', option='--config-file', value=', '.join(
                exc.config_files), rule='file not found or not readable')])
    except cfg.ConfigFileParseError as exc:
        raise exception.ConfigErrors([exception.ConfigError(
            group='-', option='--config-file', value=exc.config_file,
            rule='cannot be parsed: %s' % exc.msg)])
    except cfg.Error as exc:
        raise exception.ConfigErrors([exception.ConfigError(
            group='-', option='(command line)', value=' '.join(args),
            rule=str(exc))])
    devices.register_dynamic_opts(conf)
    return conf


def list_opts():
    """For oslo-config-generator: the static options by group."""
    return list(pci.list_opts().items()) + list(devices.list_opts().items())
