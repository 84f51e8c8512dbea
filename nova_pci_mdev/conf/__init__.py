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
from nova_pci_mdev import input_files
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
    _check_files(files + _config_file_args(args))
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
    except UnicodeDecodeError as exc:
        raise exception.ConfigErrors(
            [_not_utf8(files + _config_file_args(args), exc)])
    except OSError as exc:
        raise exception.ConfigErrors([exception.ConfigError(
            group='-', option='--config-file',
            value=exc.filename or ', '.join(files),
            rule='cannot be read: %s' % (exc.strerror or exc))])
    devices.register_dynamic_opts(conf)
    return conf


def _check_files(paths):
    """Refuse configuration files that are not regular files: oslo.config
    fails on a directory with a bare IsADirectoryError, blocks forever on
    a FIFO and reads ``/dev/zero`` until memory runs out."""
    problems = [exception.ConfigError(
        group='-', option='--config-file', value=path,
        rule='%s (a nova.conf file)' % reason)
        for path, reason in ((p, input_files.problem(p)) for p in paths)
        if reason is not None]
    if problems:
        raise exception.ConfigErrors(problems)


def _config_file_args(args):
    """The paths given as ``--config-file PATH`` / ``--config-file=PATH``."""
    args = list(args)
    paths = []
    for i, arg in enumerate(args):
        if arg == '--config-file' and i + 1 < len(args):
            paths.append(args[i + 1])
        elif arg.startswith('--config-file='):
            paths.append(arg.partition('=')[2])
    return paths


def _not_utf8(paths, error):
    """A ConfigError naming the first file in ``paths`` that is not UTF-8
    and the byte offset of its first undecodable byte.

    oslo.config decodes in chunks, so ``error`` neither names the file nor
    gives an offset within it; the files are decoded again here to find
    both. If none of them fails now, all are named with ``error``.
    """
    for path in paths:
        try:
            input_files.read_text(path)
        except UnicodeDecodeError as exc:
            return exception.ConfigError(
                group='-', option='--config-file', value=path,
                rule='is not UTF-8: %s at byte offset %d'
                % (exc.reason, exc.start))
        except OSError:
            continue
    return exception.ConfigError(
        group='-', option='--config-file', value=', '.join(paths),
        rule='is not UTF-8: %s' % error.reason)


def list_opts():
    """For oslo-config-generator: the static options by group."""
    return list(pci.list_opts().items()) + list(devices.list_opts().items())
