"""What a flavor's extra specs ask of a compute host's devices.

Pure parsing: ``pci_passthrough:alias`` and ``hw:pci_numa_affinity_policy``
(the alias path, delegated to :mod:`nova_pci_mdev.pci.request`),
``hw:numa_nodes`` and the Placement request groups ``resources[N]:<RC>``
with their traits ``trait[N]:<TRAIT>=required|forbidden`` (the values
Nova's flavor validation accepts; a numbered group's traits need its
resources, as Placement refuses a numbered group without them).
Keys this library does not use are ignored, as Nova's flavors carry many.
Invariant: a :class:`FlavorRequest` only holds validated values; every bad
value raises :class:`~nova_pci_mdev.exception.InvalidExtraSpec` naming the
key, the value and the rule.
"""

import dataclasses
import re

from nova_pci_mdev import exception
from nova_pci_mdev.pci import request as pci_request

_RESOURCES_KEY = re.compile(r'^resources(?P<suffix>[A-Za-z0-9_-]*):'
                            r'(?P<rc>.*)$')
_RC_NAME = re.compile(r'^(CUSTOM_[A-Z0-9_]+|[A-Z][A-Z0-9_]*)$')
_TRAIT_KEY = re.compile(r'^trait(?P<suffix>[A-Za-z0-9_-]*):(?P<trait>.*)$')
#: Placement's trait names: a standard one, or CUSTOM_ and [A-Z0-9_].
_TRAIT_NAME = re.compile(r'^[A-Z][A-Z0-9_]{0,254}$')
TRAIT_VALUES = ('required', 'forbidden')
_AMOUNT_RE = re.compile(r'[0-9]{1,9}')
GROUP_POLICIES = ('none', 'isolate')


@dataclasses.dataclass(frozen=True)
class FlavorRequest:
    pci_requests: tuple = ()
    numa_nodes: int | None = None
    #: request group suffix ('' for the unnumbered group) -> {RC: amount}
    resource_groups: dict = dataclasses.field(default_factory=dict)
    #: ``group_policy``: None, 'none' or 'isolate'
    group_policy: str | None = None
    #: request group suffix -> :class:`Traits` (``trait[N]:`` specs)
    trait_groups: dict = dataclasses.field(default_factory=dict)

    @property
    def resources(self):
        """All Placement resources asked for, summed over groups."""
        total = {}
        for group in self.resource_groups.values():
            for rc, amount in group.items():
                total[rc] = total.get(rc, 0) + amount
        return total


@dataclasses.dataclass(frozen=True)
class Traits:
    """The traits one request group requires and forbids."""

    required: frozenset = frozenset()
    forbidden: frozenset = frozenset()


def _amount(value):
    """``value`` as an int if it is 1 to 9 ASCII digits (surrounding
    blanks allowed), else None: ``int()`` alone would also take ``1_0``,
    ``+1`` and non-ASCII digits."""
    text = str(value).strip()
    return int(text) if _AMOUNT_RE.fullmatch(text) else None


def _positive_int(key, value):
    number = _amount(value)
    if number is None or number <= 0:
        raise exception.InvalidExtraSpec(
            key=key, value=value, reason='expected a positive integer')
    return number


def parse(extra_specs, aliases):
    """Parse ``extra_specs`` (a dict) against the configured ``aliases``."""
    pci_requests = tuple(pci_request.requests_from_extra_specs(
        extra_specs, aliases))
    numa_nodes = None
    if 'hw:numa_nodes' in extra_specs:
        numa_nodes = _positive_int('hw:numa_nodes',
                                   extra_specs['hw:numa_nodes'])
    groups = {}
    for key, value in extra_specs.items():
        match = _RESOURCES_KEY.match(key)
        if not match:
            continue
        rc = match.group('rc')
        if not _RC_NAME.match(rc):
            raise exception.InvalidExtraSpec(
                key=key, value=value,
                reason='resource class %r must be upper case letters, '
                       'digits and "_" (CUSTOM_ prefix for custom '
                       'classes)' % rc)
        amount = _amount(value)
        if amount is None:
            raise exception.InvalidExtraSpec(
                key=key, value=value,
                reason='expected a non-negative integer amount')
        if amount:
            groups.setdefault(match.group('suffix'), {})[rc] = amount
    return FlavorRequest(pci_requests=pci_requests, numa_nodes=numa_nodes,
                         resource_groups=groups,
                         group_policy=_group_policy(extra_specs, groups),
                         trait_groups=_trait_groups(extra_specs, groups))


def _trait_groups(extra_specs, groups):
    """``{suffix: Traits}`` of the ``trait[N]:<TRAIT>`` specs."""
    found = {}
    for key, value in extra_specs.items():
        match = _TRAIT_KEY.match(key)
        if not match:
            continue
        trait, suffix = match.group('trait'), match.group('suffix')
        if not _TRAIT_NAME.match(trait):
            raise exception.InvalidExtraSpec(
                key=key, value=value,
                reason='trait %r must be upper case letters, digits and "_" '
                       '(at most 255; CUSTOM_ prefix for custom traits)'
                       % trait)
        kind = str(value).strip()
        if kind not in TRAIT_VALUES:
            raise exception.InvalidExtraSpec(
                key=key, value=value,
                reason='expected required (only providers with the trait) '
                       'or forbidden (only providers without it)')
        if suffix and suffix not in groups:
            raise exception.InvalidExtraSpec(
                key=key, value=value,
                reason='request group %s asks for no resources '
                       '(resources%s:<RC>=N): Placement has nothing to '
                       'apply the trait to' % (suffix, suffix))
        found.setdefault(suffix, {})[trait] = kind
    return {suffix: Traits(
        required=frozenset(t for t, k in kinds.items() if k == 'required'),
        forbidden=frozenset(t for t, k in kinds.items() if k == 'forbidden'))
        for suffix, kinds in found.items()}


def _group_policy(extra_specs, groups):
    """``group_policy``, required (as Placement requires it) when more
    than one numbered request group asks for resources."""
    policy = extra_specs.get('group_policy')
    if policy is not None:
        policy = str(policy).strip()
        if policy not in GROUP_POLICIES:
            raise exception.InvalidExtraSpec(
                key='group_policy', value=extra_specs['group_policy'],
                reason='expected one of %s' % ', '.join(GROUP_POLICIES))
    numbered = sorted(s for s in groups if s)
    if len(numbered) > 1 and policy is None:
        raise exception.InvalidExtraSpec(
            key='group_policy', value='(not set)',
            reason='required with more than one numbered request group '
                   '(%s): none (groups may share a provider) or isolate '
                   '(each its own)' % ', '.join(
                       'resources%s:' % s for s in numbered))
    return policy


def specs_from_pairs(pairs):
    """``KEY=VALUE`` strings (the CLI's ``--extra-spec``) as a flavor's
    extra specs dict; a malformed or repeated key is InvalidExtraSpec."""
    specs = {}
    for pair in pairs:
        key, sep, value = pair.partition('=')
        if not sep or not key.strip():
            raise exception.InvalidExtraSpec(
                key='--extra-spec', value=pair,
                reason='expected KEY=VALUE, e.g. '
                       'pci_passthrough:alias=vGPU:1')
        key = key.strip()
        if key in specs:
            raise exception.InvalidExtraSpec(
                key=key, value=value.strip(),
                reason='given twice (a flavor holds one value per key; '
                       'list several aliases in one value: '
                       'pci_passthrough:alias=a:1,b:2)')
        specs[key] = value.strip()
    return specs
