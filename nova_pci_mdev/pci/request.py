"""PCI aliases (``[pci] alias``) and the requests a flavor makes of them.

An alias has Nova's keys (``name``, ``vendor_id``, ``product_id``,
``device_type``, ``numa_policy``, ``capability_type``, ``resource_class``,
``traits``, ``live_migratable``) plus ``mdev_type``. ``device_type`` accepts
``type-PCI``, ``type-PF``, ``type-VF``, ``vdpa``, ``mdev-pf`` and
``mdev-vf``. An alias with ``mdev_type`` and no ``device_type`` asks for a
vGPU slot of that type, whatever carries it: an mdev (``mdev-vf``) or an
NVIDIA vGPU VF (a ``type-VF`` whose vGPU type is chosen in sysfs, see
:mod:`nova_pci_mdev.virt.libvirt.nvidia.vf`): its spec names no
``dev_type`` (parent pools are only matched when asked for), and the alias
counts as ``mdev-vf`` when same-name entries are compared. ``mdev_type``
with ``device_type: type-VF`` asks for vGPU VFs only.

Invariants:

* An :class:`AliasTable` maps a name to one :class:`Alias`. All entries of
  one name agree on the NUMA policy (absent means ``legacy``) and on the
  device type (Nova refuses the others); their specs are ORed, in
  configuration order.
* An alias names at least one of ``vendor_id``, ``product_id`` and
  ``mdev_type`` (``vendor_id`` alone, as in the 2017 cover letter, is
  enough); one that names none would match every whitelisted device and is
  refused, as Nova refuses it.
* A spec dict holds strings only, with keys among ``vendor_id``,
  ``product_id`` (four lower-case hex digits), ``dev_type``, ``mdev_type``
  and ``live_migratable``. ``resource_class``/``traits`` only matter to
  Nova's PCI-in-Placement and are accepted and ignored (with a warning);
  ``capability_type`` is accepted and dropped.
* :func:`requests_from_extra_specs` is pure, gives every request a fresh
  ``request_id`` and raises only InvalidExtraSpec / InvalidAlias naming the
  alias and the value. The flavor's ``hw:pci_numa_affinity_policy`` wins
  over the alias' ``numa_policy``, as in Nova.
"""

import dataclasses
import re
import uuid

from nova_pci_mdev import exception
from nova_pci_mdev import names
from nova_pci_mdev.objects import fields
from nova_pci_mdev.objects import instance_pci_request
from nova_pci_mdev.pci import devspec
from nova_pci_mdev.pci import jsonopt

DevType = fields.PciDeviceType
Policy = fields.PCINUMAAffinityPolicy

ALIAS_SPEC = 'pci_passthrough:alias'
NUMA_POLICY_SPEC = 'hw:pci_numa_affinity_policy'
ALIAS_KEYS = ('name', 'vendor_id', 'product_id', 'device_type',
              'numa_policy', 'mdev_type', 'capability_type',
              'resource_class', 'traits', 'live_migratable')
IGNORED_KEYS = ('resource_class', 'traits')
MAX_NAME_LEN = 256
_ID_RE = re.compile(r'^[0-9a-fA-F]{4}\Z')
_COUNT_RE = re.compile(r'^[0-9]{1,9}\Z')
#: An alias must name one of these, or it would match every device.
_NARROWING_KEYS = frozenset(('vendor_id', 'product_id', 'mdev_type'))
#: Device types an alias with ``mdev_type`` may name.
_TYPED = DevType.MDEV_TYPES + (DevType.SRIOV_VF,)


@dataclasses.dataclass(frozen=True)
class Alias:
    """All ``[pci] alias`` entries of one name."""

    name: str
    numa_policy: str
    dev_type: str | None
    specs: tuple


def _effective_dev_type(entry):
    dev_type = entry.get('device_type')
    if dev_type is None and entry.get('mdev_type') is not None:
        return DevType.MDEV_VF
    return dev_type


def _parse_entry(entry, bad):
    """(name, numa_policy, dev_type, spec) of one alias, or None."""
    before = bad.count
    if not isinstance(entry, dict):
        bad(None, jsonopt.show(entry), 'expected a JSON object')
        return None
    unknown = sorted(str(k) for k in entry if k not in ALIAS_KEYS)
    if unknown:
        bad(unknown[0], ', '.join(unknown),
            'unknown key(s); allowed: %s' % ', '.join(ALIAS_KEYS))
    name = _name(entry.get('name'), bad)
    spec = _ids(entry, bad)
    dev_type = _types(entry, spec, bad)
    policy = entry.get('numa_policy', Policy.LEGACY)
    if policy not in Policy.ALL:
        bad('numa_policy', jsonopt.show(policy),
            'expected one of %s' % ', '.join(Policy.ALL))
    _others(entry, spec, bad)
    if bad.count != before:
        return None
    if not _NARROWING_KEYS & set(spec):
        bad(None, jsonopt.show(entry), 'alias %s names none of %s, so it '
            'would match every whitelisted device (Nova refuses such '
            'aliases)' % (name, ', '.join(sorted(_NARROWING_KEYS))))
        return None
    if dev_type is not None:
        spec['dev_type'] = dev_type
    return name, policy, _effective_dev_type(entry), spec


def _name(name, bad):
    if not isinstance(name, str) or not name.strip():
        bad('name', jsonopt.show(name), 'every alias needs a non-empty name')
    elif len(name) > MAX_NAME_LEN or ',' in name or ':' in name:
        bad('name', jsonopt.show(name), 'at most %d characters, without '
            '"," or ":" (they separate aliases and counts in %s)'
            % (MAX_NAME_LEN, ALIAS_SPEC))
    else:
        return name.strip()
    return None


def _ids(entry, bad):
    """The spec's ``vendor_id`` / ``product_id``, lower case."""
    spec = {}
    for key in ('vendor_id', 'product_id'):
        if key in entry:
            value = entry[key]
            if isinstance(value, str) and _ID_RE.match(value):
                spec[key] = value.lower()
            else:
                bad(key, jsonopt.show(value), 'expected 4 hex digits')
    return spec


def _types(entry, spec, bad):
    """``device_type`` (returned) and ``mdev_type`` (into ``spec``)."""
    dev_type = entry.get('device_type')
    if 'device_type' in entry and dev_type not in DevType.ALL:
        bad('device_type', jsonopt.show(dev_type),
            'expected one of %s' % ', '.join(DevType.ALL))
    if 'mdev_type' in entry:
        try:
            spec['mdev_type'] = names.validate_mdev_type(entry['mdev_type'])
        except exception.Invalid:
            bad('mdev_type', jsonopt.show(entry['mdev_type']),
                names.MDEV_TYPE_RULE)
        if dev_type in DevType.ALL and dev_type not in _TYPED:
            bad('device_type', jsonopt.show(dev_type),
                'an alias with mdev_type asks for %s (an NVIDIA vGPU VF)'
                % ', '.join(_TYPED))
    return dev_type


def _others(entry, spec, bad):
    """``capability_type``, ``live_migratable`` and the ignored keys."""
    if entry.get('capability_type', 'pci') != 'pci':
        bad('capability_type', jsonopt.show(entry['capability_type']),
            'the only capability type is "pci"')
    if 'live_migratable' in entry:
        try:
            spec['live_migratable'] = devspec.parse_bool_tag(
                entry['live_migratable'])
        except ValueError:
            bad('live_migratable', jsonopt.show(entry['live_migratable']),
                'expected a boolean such as "yes" or "no"')
    for key in IGNORED_KEYS:
        if key in entry and not isinstance(entry[key], str):
            bad(key, jsonopt.show(entry[key]), 'expected a string')


class _Reporter(object):
    """Records the problems of one alias entry; ``count`` of errors."""

    def __init__(self, problems, warnings, group, option, label):
        self.problems, self.warnings = problems, warnings
        self.group, self.option, self.label = group, option, label
        self.count = 0

    def __call__(self, key, value, rule, warn=False):
        cls = exception.ConfigWarning if warn else exception.ConfigError
        problem = cls(group=self.group, option=self.option, value=value,
                      rule='%s%s: %s' % (
                          self.label, ', key "%s"' % key if key else '',
                          rule), key=key)
        self.problems.append(problem)
        if warn:
            self.warnings.append(problem)
        else:
            self.count += 1


class AliasTable(object):
    """Aliases by name; see the module docstring for the invariants."""

    def __init__(self, aliases=(), warnings=()):
        self._aliases = {a.name: a for a in aliases}
        self.warnings = tuple(warnings)

    def __repr__(self):
        return 'AliasTable(%s)' % ', '.join(self._aliases)

    def __contains__(self, name):
        return name in self._aliases

    def get(self, name):
        return self._aliases.get(name)

    def names(self):
        return tuple(self._aliases)

    def aliases(self):
        return tuple(self._aliases.values())

    @classmethod
    def from_config(cls, values):
        """A table from ``[pci] alias`` values, or ConfigErrors."""
        problems = []
        table = cls.parse(values, problems)
        if any(p.severity == 'error' for p in problems):
            raise exception.ConfigErrors(problems)
        return table

    @classmethod
    def parse(cls, values, problems, group='pci', option='alias'):
        """Parse what is valid; append a ConfigError per problem."""
        if values is None:
            values = []
        elif isinstance(values, str):
            values = [values]
        warnings = []
        merged = {}   # name -> [policy, dev_type, [specs], first label]
        for number, text in enumerate(values, 1):
            label = 'entry %d' % number

            bad = _Reporter(problems, warnings, group, option, label)
            entry = jsonopt.load_json(text, lambda v, r: bad(None, v, r))
            if entry is jsonopt.INVALID:
                continue
            if not isinstance(entry, dict):     # null too, as in Nova
                bad(None, jsonopt.show(text), 'expected a JSON object')
                continue
            parsed = _parse_entry(entry, bad)
            if parsed is None:
                continue
            name, policy, dev_type, spec = parsed
            for key in IGNORED_KEYS:
                if key in entry:
                    bad(key, jsonopt.show(entry[key]), 'ignored: only '
                        "Nova's PCI in Placement uses it", warn=True)
            if not ({'vendor_id', 'product_id'} <= set(spec)
                    or 'mdev_type' in spec):
                bad(None, jsonopt.show(text), 'alias %s names neither '
                    'vendor_id and product_id nor mdev_type, so it matches '
                    'every whitelisted device of %s' % (name, ', '.join(
                        '%s %s' % (k, spec[k]) for k in sorted(spec)
                        if k in _NARROWING_KEYS)), warn=True)
            known = merged.get(name)
            if known is None:
                merged[name] = [policy, dev_type, [spec], label]
            elif known[0] != policy:
                bad('numa_policy', jsonopt.show(policy),
                    'alias %s already has numa_policy %s (%s); same-name '
                    'aliases must agree' % (name, known[0], known[3]))
            elif known[1] != dev_type:
                bad('device_type', jsonopt.show(dev_type),
                    'alias %s already asks for device_type %s (%s); '
                    'same-name aliases must agree'
                    % (name, known[1], known[3]))
            else:
                known[2].append(spec)
        aliases = [Alias(name=n, numa_policy=v[0], dev_type=v[1],
                         specs=tuple(v[2])) for n, v in merged.items()]
        return cls(aliases, warnings)


def _bad_spec(key, value, reason):
    return exception.InvalidExtraSpec(key=key, value=value, reason=reason)


def flavor_numa_policy(extra_specs):
    """The flavor's ``hw:pci_numa_affinity_policy`` or None; validated."""
    policy = extra_specs.get(NUMA_POLICY_SPEC)
    if policy is None:
        return None
    if policy not in Policy.ALL:
        raise _bad_spec(NUMA_POLICY_SPEC, policy,
                        'expected one of %s' % ', '.join(Policy.ALL))
    return policy


def parse_alias_spec(value):
    """``'a:2, b:1'`` -> ``[('a', 2), ('b', 1)]`` or InvalidExtraSpec."""
    if not isinstance(value, str) or not value.strip():
        raise _bad_spec(ALIAS_SPEC, value,
                        'expected NAME:COUNT[,NAME:COUNT...]')
    result = []
    for part in value.split(','):
        name, sep, count = part.partition(':')
        name, count = name.strip(), count.strip()
        if not sep or not name:
            raise _bad_spec(ALIAS_SPEC, value, 'item %r is not NAME:COUNT'
                            % part.strip())
        if not _COUNT_RE.match(count) or int(count) < 1:
            raise _bad_spec(ALIAS_SPEC, value, 'alias %s: count %r is not '
                            'a positive integer' % (name, count))
        result.append((name, int(count)))
    return result


def requests_from_extra_specs(extra_specs, aliases):
    """InstancePCIRequests for a flavor's ``pci_passthrough:alias``.

    Returns ``[]`` when the flavor asks for no alias.
    """
    extra_specs = extra_specs or {}
    policy = flavor_numa_policy(extra_specs)
    if ALIAS_SPEC not in extra_specs:
        return []
    value = extra_specs[ALIAS_SPEC]
    requests = []
    for name, count in parse_alias_spec(value):
        alias = aliases.get(name)
        if alias is None:
            raise exception.InvalidAlias(
                alias=name, reason='%s=%r asks for it but [pci] alias does '
                'not define it (defined: %s)' % (
                    ALIAS_SPEC, value, ', '.join(aliases.names()) or 'none'))
        requests.append(instance_pci_request.InstancePCIRequest(
            count=count,
            spec=[dict(spec) for spec in alias.specs],
            alias_name=name,
            numa_policy=policy or alias.numa_policy,
            request_id=str(uuid.uuid4()),
            requester_id=None,
            is_new=False))
    return requests
