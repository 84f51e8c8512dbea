"""Whole-configuration validation: every problem of a config in one run.

Invariants:

* :func:`check` never raises on bad values: it returns the Settings it
  could build (None when any error-level problem exists) and the list of
  every problem, each a ConfigError (``severity`` ``'error'``) or a
  ConfigWarning (``'warning'``), in the order: ``[pci] device_spec``,
  ``[pci] alias``, ``[devices]``, ``[mdev_*]`` groups, cross-checks.
* Problems never depend on one another's order of discovery: a bad entry
  is skipped and checking goes on.
"""

import difflib
import fnmatch

from oslo_config import cfg

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.conf import devices
from nova_pci_mdev.conf import mdev
from nova_pci_mdev.conf import settings as settings_mod
from nova_pci_mdev.pci import request
from nova_pci_mdev.pci import whitelist


def _get(conf, group, option, problems):
    """An option's value, or [] after reporting why it cannot be read."""
    value, reason = devices.safe_get(conf, group, option)
    if reason is not None:
        problems.append(exception.ConfigError(
            group=group, option=option, value='(unreadable)', rule=reason))
        return []
    return value


def _enabled_types(conf, problems):
    valid = []
    seen = set()
    for raw in _get(conf, 'devices', 'enabled_mdev_types', problems):
        item = raw.strip()
        if not item:
            problems.append(exception.ConfigError(
                group='devices', option='enabled_mdev_types', value=repr(raw),
                rule='empty item in the list'))
            continue
        try:
            names.validate_mdev_type(item)
        except exception.Invalid:
            problems.append(exception.ConfigError(
                group='devices', option='enabled_mdev_types',
                value=repr(item), rule=names.MDEV_TYPE_RULE))
            continue
        if item in seen:
            problems.append(exception.ConfigWarning(
                group='devices', option='enabled_mdev_types',
                value=repr(item), rule='listed twice'))
            continue
        seen.add(item)
        valid.append(item)
    return valid


def _stray_groups(conf, enabled, problems):
    """Warn about [mdev_x] / [vgpu_x] sections of types not enabled."""
    enabled = set(enabled)
    try:
        sections = conf.list_all_sections()
    except (AttributeError, cfg.Error):   # no config file parsed yet
        return
    for section in sections:
        for prefix in (devices.GROUP_PREFIX, devices.DEPRECATED_GROUP_PREFIX):
            if section.startswith(prefix):
                mdev_type = section[len(prefix):]
                if mdev_type not in enabled:
                    problems.append(exception.ConfigWarning(
                        group=section, option='(group)',
                        value=repr(mdev_type),
                        rule='type %s is not in [devices] enabled_mdev_types;'
                             ' the group is ignored' % mdev_type))


def _file_sections(conf):
    """``{section: {option: [values]}}`` as written in the config files
    (oslo.config's own parser; later files win per option)."""
    merged = {}
    for path in conf.config_file or ():
        sections = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.Error, UnicodeError):
            continue        # new_config reported it already
        for section, options in sections.items():
            merged.setdefault(section, {}).update(options)
    return merged


def _mdev_group_options(conf, enabled, problems):
    """Options of [mdev_<type>] / [vgpu_<type>] that are not registered
    (typos: oslo.config ignores them silently), and [vgpu_<type>] options
    that [mdev_<type>] shadows."""
    known = sorted(opt.dest for opt in devices.dynamic_opts('x'))
    sections = _file_sections(conf)
    for section, options in sorted(sections.items()):
        for prefix in (devices.GROUP_PREFIX, devices.DEPRECATED_GROUP_PREFIX):
            if not section.startswith(prefix) or (
                    section[len(prefix):] not in enabled):
                continue
            for option in sorted(set(options) - set(known)):
                near = difflib.get_close_matches(option, known, n=1)
                problems.append(exception.ConfigWarning(
                    group=section, option=option,
                    value=repr(options[option][-1]),
                    rule='unknown option, ignored (the options of this '
                         'group are %s)%s' % (', '.join(known), (
                             '; did you mean %s?' % near[0]) if near else '')))
    for mdev_type in enabled:
        old = sections.get(devices.DEPRECATED_GROUP_PREFIX + mdev_type, {})
        new = sections.get(devices.group_name(mdev_type), {})
        for option in sorted(set(old) & set(new) & set(known)):
            problems.append(exception.ConfigWarning(
                group=devices.DEPRECATED_GROUP_PREFIX + mdev_type,
                option=option, value=repr(old[option][-1]),
                rule='shadowed by [%s] %s = %s, which is used instead (%s '
                     'is the deprecated name of the group)' % (
                         devices.group_name(mdev_type), option,
                         new[option][-1],
                         devices.DEPRECATED_GROUP_PREFIX + mdev_type)))


def _unreachable_types(wl, aliases, enabled, problems):
    """Warn about specs and aliases naming types that are not enabled."""
    enabled = tuple(enabled)
    for spec in wl.specs:
        if spec.mdev_type is not None and not fnmatch.filter(
                enabled, spec.mdev_type):
            problems.append(exception.ConfigWarning(
                group='pci', option='device_spec', value=spec.source,
                rule='mdev_type %s matches no type of [devices] '
                     'enabled_mdev_types' % spec.mdev_type))
    for alias in aliases.aliases():
        for spec in alias.specs:
            mdev_type = spec.get('mdev_type')
            if mdev_type is not None and mdev_type not in enabled:
                problems.append(exception.ConfigWarning(
                    group='pci', option='alias', value=repr(alias.name),
                    rule='alias %s asks for mdev_type %s, which is not in '
                         '[devices] enabled_mdev_types' % (alias.name,
                                                           mdev_type)))


def check(conf, devname_resolver=None):
    """(Settings or None, problems) for a ConfigOpts from ``new_config``."""
    devices.register_dynamic_opts(conf)
    problems = []
    wl = whitelist.Whitelist.parse(
        _get(conf, 'pci', 'device_spec', problems), problems,
        devname_resolver=devname_resolver)
    aliases = request.AliasTable.parse(
        _get(conf, 'pci', 'alias', problems), problems)
    enabled = _enabled_types(conf, problems)
    mdev_types = mdev.read_mdev_types(conf, enabled, problems)
    _stray_groups(conf, enabled, problems)
    _mdev_group_options(conf, enabled, problems)
    _unreachable_types(wl, aliases, enabled, problems)
    if any(p.severity == 'error' for p in problems):
        return None, problems
    settings = settings_mod.Settings(
        whitelist=wl, aliases=aliases, enabled_mdev_types=tuple(enabled),
        mdev_types=mdev_types, warnings=tuple(problems))
    return settings, problems


def validate(conf, devname_resolver=None):
    """Every problem of the configuration (errors and warnings)."""
    return check(conf, devname_resolver=devname_resolver)[1]


def load_settings(conf, devname_resolver=None):
    """Settings, or ConfigErrors listing every problem (warnings too)."""
    settings, problems = check(conf, devname_resolver=devname_resolver)
    if settings is None:
        raise exception.ConfigErrors(problems)
    return settings
