"""The cloud's scheduler: Placement, filters, claim, reschedule.

Nova's scheduler and conductor in miniature, over what the hosts reported
to the :class:`~.cloud.Cloud` (``cloud.pools``, ``cloud.providers``) and a
real Placement (``cloud.client``, optional):

1. **Placement** (the flavor has ``resources`` groups and the cloud has a
   Placement): ``GET /allocation_candidates`` for the groups; only hosts
   with a candidate go on, each with the first allocation request that
   lies in its tree, written for the consumer before the host claims.
2. **Filters**: the host's reported pools and NUMA cells through the
   product's ``PciDeviceStats.from_pools`` and ``numa_fit.fit_instance``
   (what Nova's PciPassthroughFilter and NUMATopologyFilter do).
3. **Claim** on the first passing host by name (the weigher) with
   ``ComputeHost.claim(consumer, flavor, allocations=...)``. A host that
   cannot claim after all (:data:`RESCHEDULE`) is skipped like a
   reschedule; its allocation is undone. No host left:
   :class:`NoValidHost` naming every host considered and its reason.

Invariant: a failed attempt leaves Placement as it found it (the consumer's
allocations are deleted, or restored for an evacuation).
"""

from nova_pci_mdev import exception
from nova_pci_mdev.pci import numa_fit
from nova_pci_mdev.pci import stats as stats_mod

PROJECT = 'a1a1a1a1-0000-4000-8000-00000000000a'
USER = 'b2b2b2b2-0000-4000-8000-00000000000b'
#: What makes the scheduler try the next host (Nova's reschedule).
RESCHEDULE = (exception.RequestNotSatisfiable, exception.MdevError,
              exception.PlacementConflict)


class NoValidHost(Exception):
    """The scheduler found no host; ``reasons`` maps host -> why not."""

    def __init__(self, what, reasons):
        self.reasons = dict(reasons)
        detail = '; '.join('%s: %s' % item for item in sorted(
            self.reasons.items())) or 'no compute host is up'
        super().__init__('No valid host was found for %s. %s'
                         % (what, detail))


def plain_allocations(allocations):
    """Placement's ``{rp: {'resources': {...}, ...}}`` -> ``{rp: {...}}``."""
    return {rp: dict(a['resources']) for rp, a in allocations.items()}


def put_allocations(client, consumer, current, extra=None, replace=None):
    """Write ``current`` (or ``replace``) plus ``extra`` for ``consumer``,
    with the consumer generation of ``current`` (a GET /allocations
    body)."""
    merged = plain_allocations(
        current['allocations'] if replace is None else replace)
    for rp, resources in (extra or {}).items():
        mine = merged.setdefault(rp, {})
        for rc, amount in resources.items():
            mine[rc] = mine.get(rc, 0) + amount
    client.claim(consumer, {'allocations': {
        rp: {'resources': res} for rp, res in merged.items()}},
        PROJECT, USER, consumer_generation=current.get('consumer_generation'))


def move_allocations(client, source, target):
    """Give ``source``'s allocations to ``target`` (which has none)."""
    moved = client.get_allocations(source)
    client.delete_allocations(source)
    if moved['allocations']:
        client.claim(target, moved, PROJECT, USER)


class Scheduler(object):
    """Schedules for one :class:`~.cloud.Cloud` (see the module)."""

    def __init__(self, cloud):
        self.cloud = cloud

    def schedule(self, consumer, what, flavor, exclude=(), force=None,
                 merge=False, claim=None):
        """Pick a host and claim there; returns ``(SimHost, ClaimResult)``.

        ``exclude``: host names not to consider; ``force``: the only host
        to consider (even if excluded); ``merge``: add the allocation to
        the consumer's existing ones (an evacuation keeps its source part);
        ``claim(compute, consumer, flavor, allocations)``: how the host
        claims (``ComputeHost.claim`` by default; a live migration claims
        with ``claim_live_move``), its result is returned.
        """
        hosts = self.cloud.hosts
        reasons = {}
        if force is not None:
            names = [force]
            if not hosts[force].up:
                reasons[force] = 'host is down'
                names = []
        else:
            names = sorted(n for n, s in hosts.items()
                           if s.up and n not in exclude)
        for name, areq in self._candidates(flavor, names, reasons):
            why = self._filter(name, flavor)
            if why:
                reasons[name] = why
                continue
            try:
                result = self._claim_on(hosts[name], consumer, flavor, areq,
                                        merge, claim)
            except RESCHEDULE as exc:
                reasons[name] = 'claim failed: %s' % exc
                continue
            return hosts[name], result
        raise NoValidHost(what, reasons)

    def _candidates(self, flavor, names, reasons):
        """Hosts in the order to try, each with its allocation request."""
        client = self.cloud.client
        if not (flavor.resource_groups and client is not None):
            return [(name, None) for name in names]
        numbered = [s for s in flavor.resource_groups if s]
        groups = {}
        for suffix, resources in flavor.resource_groups.items():
            rule = flavor.trait_groups.get(suffix)
            groups[suffix] = {'resources': resources, 'required': [] if (
                rule is None) else sorted(rule.required) + [
                    '!' + t for t in sorted(rule.forbidden)]}
        body = client.allocation_candidates(
            groups=groups,
            group_policy=flavor.group_policy if len(numbered) > 1 else None)
        first = {}
        for areq in body['allocation_requests']:
            owners = {self.cloud.providers.get(rp)
                      for rp in areq['allocations']}
            if len(owners) == 1:
                first.setdefault(owners.pop(), areq)
        for name in names:
            if name not in first:
                reasons[name] = ('Placement has no allocation candidate for '
                                 '%s' % flavor.resource_groups)
        return [(name, first[name]) for name in names if name in first]

    def _filter(self, name, flavor):
        """PciPassthroughFilter + NUMATopologyFilter on reported pools."""
        topology = self.cloud.hosts[name].compute.topology
        stats = stats_mod.PciDeviceStats.from_pools(self.cloud.pools[name],
                                                    topology)
        try:
            numa_fit.fit_instance(topology, flavor.numa_nodes,
                                  flavor.pci_requests, stats)
        except exception.RequestNotSatisfiable as exc:
            return 'filtered out: %s' % exc
        return None

    def _claim_on(self, sim, consumer, flavor, areq, merge, claim=None):
        client = self.cloud.client
        before = None
        allocations = None
        if areq is not None:
            allocations = plain_allocations(areq['allocations'])
            if merge:
                before = client.get_allocations(consumer)
                put_allocations(client, consumer, before, allocations)
            else:
                client.claim(consumer, areq, PROJECT, USER)
        try:
            if claim is not None:
                return claim(sim.compute, consumer, flavor, allocations)
            return sim.compute.claim(consumer, flavor,
                                     allocations=allocations)
        except Exception:
            if before is not None:
                put_allocations(client, consumer,
                                client.get_allocations(consumer),
                                replace=before['allocations'])
            elif areq is not None:
                client.delete_allocations(consumer)
            raise
