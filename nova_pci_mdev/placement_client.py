"""HTTP client of an OpenStack Placement service (microversion 1.39).

The I/O edge of the Placement path: it pushes a
:class:`nova_pci_mdev.pci.placement.ProviderTree` to Placement and asks
Placement for allocation candidates and allocations. It speaks plain
``requests``: the endpoint is given (no service catalog), the token is a
header (``admin`` for Placement's ``noauth2``), and the in-process test
fixture (wsgi-intercept) intercepts ``requests``. A deployment that needs
Keystone authentication passes a ``requests.Session`` whose ``auth`` adds
the token (or sets ``token``).

Invariants:

* :meth:`PlacementClient.sync_tree` is idempotent: a second call with the
  same tree writes nothing, so no provider generation changes.
* Generation conflicts (409 ``placement.concurrent_update``) on provider
  writes are retried after re-reading the provider, at most
  ``max_retries`` times; any other error raises at once.
* A child provider of the root that is no longer in the tree is deleted
  only when nothing is allocated on it; otherwise it is kept, made fully
  reserved (nothing new lands on it) and reported.
* Every failure is an :class:`~nova_pci_mdev.exception.PlacementError`
  (``PlacementConflict`` for 409) naming method, URL, status, Placement's
  error code and message.
"""

import dataclasses
import logging

import requests

from nova_pci_mdev import exception

LOG = logging.getLogger(__name__)

MICROVERSION = '1.39'
CONCURRENT_UPDATE = 'placement.concurrent_update'


@dataclasses.dataclass
class SyncReport:
    """What :meth:`PlacementClient.sync_tree` changed (provider names)."""

    created: list = dataclasses.field(default_factory=list)
    updated: list = dataclasses.field(default_factory=list)
    deleted: list = dataclasses.field(default_factory=list)
    #: name -> why a provider that left the tree is still in Placement.
    kept: dict = dataclasses.field(default_factory=dict)
    #: generation conflicts that were resolved by re-reading.
    retries: int = 0

    @property
    def changed(self):
        return bool(self.created or self.updated or self.deleted)


def _resources_param(resources):
    return ','.join('%s:%d' % (rc, amount)
                    for rc, amount in sorted(resources.items()))


def _normalized(inventories):
    return {rc: dict(inv, allocation_ratio=float(
        inv.get('allocation_ratio', 1.0))) for rc, inv in inventories.items()}


def _inventory_target(prov, merge):
    """What ``prov``'s inventories must become (None: not managed)."""
    desired = {rc: inv.to_dict() for rc, inv in prov.inventories.items()}
    if not merge:
        return lambda current: desired
    if not desired:
        return lambda current: None
    return lambda current: dict(current, **desired)


def _traits_target(prov, merge):
    if not merge:
        return lambda current: set(prov.traits)
    if not prov.traits:
        return lambda current: None
    return lambda current: current | prov.traits


def _fully_reserved(current):
    return {rc: dict(inv, reserved=inv['total'])
            for rc, inv in current.items()}


class PlacementClient:
    """A client of one Placement endpoint.

    :param endpoint: base URL, e.g. ``http://127.0.0.1:8778`` (the path
        prefix, if any, included).
    :param session: a ``requests.Session`` (or compatible object with
        ``request(method, url, **kw)``); a new one by default.
    :param token: value of ``X-Auth-Token`` (None: header not sent).
    :param max_retries: retries of one write after generation conflicts.
    :param timeout: seconds per HTTP request.
    """

    def __init__(self, endpoint, session=None, token='admin', max_retries=5,
                 timeout=30):
        self.endpoint = endpoint.rstrip('/')
        self.session = session if session is not None else requests.Session()
        self.max_retries = max_retries
        self.timeout = timeout
        self.headers = {'OpenStack-API-Version': 'placement ' + MICROVERSION,
                        'Accept': 'application/json'}
        if token:
            self.headers['X-Auth-Token'] = token
        #: provider uuid -> (generation, inventories, traits) last seen.
        self._content = {}
        #: custom resource classes and traits known to exist.
        self._known_names = set()

    # -- HTTP ----------------------------------------------------------------

    def _request(self, method, path, json=None, params=None, ok=(200,)):
        url = self.endpoint + path
        try:
            resp = self.session.request(method, url, json=json,
                                        params=params, headers=self.headers,
                                        timeout=self.timeout)
        except requests.RequestException as exc:
            raise exception.PlacementError(method=method, url=url,
                                           status=None, code='unreachable',
                                           detail=str(exc))
        if resp.status_code in ok:
            return resp
        code, detail = self._error_of(resp)
        cls = (exception.PlacementConflict if resp.status_code == 409
               else exception.PlacementError)
        raise cls(method=method, url=resp.url or url,
                  status=resp.status_code, code=code, detail=detail)

    @staticmethod
    def _error_of(resp):
        try:
            error = resp.json()['errors'][0]
            code = error.get('code')
            detail = error.get('detail') or error.get('title') or ''
        except (ValueError, KeyError, IndexError, TypeError):
            code, detail = None, resp.text
        # webob puts a generic explanation before a blank line.
        if '\n\n' in detail:
            detail = detail.split('\n\n', 1)[1]
        detail = ' '.join(detail.split())
        return code, detail[:1000]

    def _get(self, path, params=None):
        return self._request('GET', path, params=params).json()

    # -- reading -------------------------------------------------------------

    def providers(self, in_tree=None):
        """Providers (Placement's dicts), optionally those of one tree."""
        params = {'in_tree': in_tree} if in_tree else None
        return self._get('/resource_providers',
                         params=params)['resource_providers']

    def provider(self, uuid):
        """The provider's dict, or None if Placement does not know it."""
        try:
            return self._get('/resource_providers/%s' % uuid)
        except exception.PlacementError as exc:
            if exc.status == 404:
                return None
            raise

    def inventories(self, uuid):
        """``(generation, {rc: inventory dict})`` of a provider."""
        body = self._get('/resource_providers/%s/inventories' % uuid)
        return body['resource_provider_generation'], body['inventories']

    def traits(self, uuid):
        """``(generation, set of traits)`` of a provider."""
        body = self._get('/resource_providers/%s/traits' % uuid)
        return body['resource_provider_generation'], set(body['traits'])

    def usages(self, uuid):
        """``{rc: used}`` of a provider."""
        return self._get('/resource_providers/%s/usages' % uuid)['usages']

    def provider_allocations(self, uuid):
        """``{consumer uuid: {'resources': {rc: n}}}`` on a provider."""
        return self._get(
            '/resource_providers/%s/allocations' % uuid)['allocations']

    def get_allocations(self, consumer_uuid):
        """Placement's allocations of a consumer: ``{'allocations': {rp:
        {'resources': ..., 'generation': ...}}, 'consumer_generation',
        'project_id', 'user_id', 'consumer_type'}`` (only ``allocations``,
        empty, for an unknown consumer)."""
        return self._get('/allocations/%s' % consumer_uuid)

    # -- syncing a provider tree ---------------------------------------------

    def sync_tree(self, tree):
        """Make Placement hold ``tree``; return a :class:`SyncReport`.

        Children are owned by this host: their inventories and traits are
        set exactly. The root may be shared with other services: the
        tree's root inventories and traits are merged into what it has.
        Only children named ``<root name>_...`` are candidates for removal.
        A no-op sync by a client that synced before costs one GET.
        """
        try:
            return self._sync_tree(tree)
        except exception.PlacementError:
            self._forget()
            raise

    def _forget(self):
        """Drop what this client believes Placement holds."""
        self._content.clear()
        self._known_names.clear()

    def _sync_tree(self, tree):
        report = SyncReport()
        root = tree.root
        self._ensure_resource_classes(
            rc for p in tree.providers for rc in p.inventories)
        self._ensure_traits(t for p in tree.providers for t in p.traits)
        existing = {p['uuid']: p for p in self.providers(in_tree=root.uuid)}
        for prov in tree.providers:
            current = existing.get(prov.uuid)
            generation = current and current['generation']
            changed = False
            if current is None:
                generation = self._create_provider(prov)
                if generation is not None:
                    report.created.append(prov.name)
                else:
                    changed = True
            elif (current['name'] != prov.name or
                  current.get('parent_provider_uuid') != prov.parent_uuid):
                self._update_provider(prov)
                changed = True
            changed |= self._sync_content(
                prov.uuid, generation,
                _inventory_target(prov, merge=prov is root),
                _traits_target(prov, merge=prov is root), report)
            if changed and current is not None:
                report.updated.append(prov.name)
        wanted = {p.uuid for p in tree.providers}
        parents = {p.get('parent_provider_uuid') for p in existing.values()}
        for uuid, prov in sorted(existing.items(),
                                 key=lambda item: item[1]['name']):
            if (uuid in wanted or prov.get('parent_provider_uuid') != root.uuid
                    or not prov['name'].startswith(root.name + '_')):
                continue
            self._remove_provider(prov, uuid in parents, report)
        return report

    def _ensure_resource_classes(self, names):
        custom = {n for n in names if n.startswith('CUSTOM_')}
        custom -= self._known_names
        if custom:
            known = {rc['name'] for rc in
                     self._get('/resource_classes')['resource_classes']}
            for name in sorted(custom - known):
                self._request('PUT', '/resource_classes/%s' % name,
                              ok=(201, 204))
            self._known_names.update(custom)

    def _ensure_traits(self, names):
        custom = {n for n in names if n.startswith('CUSTOM_')}
        custom -= self._known_names
        if custom:
            known = set(self._get('/traits', params={
                'name': 'in:' + ','.join(sorted(custom))})['traits'])
            for name in sorted(custom - known):
                self._request('PUT', '/traits/%s' % name, ok=(201, 204))
            self._known_names.update(custom)

    def _create_provider(self, prov):
        """Create ``prov`` and return its generation.

        Returns None if the provider existed in another tree and was moved
        under its parent instead.
        """
        body = {'name': prov.name, 'uuid': prov.uuid}
        if prov.parent_uuid:
            body['parent_provider_uuid'] = prov.parent_uuid
        try:
            created = self._request('POST', '/resource_providers',
                                    json=body).json()
        except exception.PlacementConflict:
            # Same uuid in another tree (the compute node was registered
            # again under a new uuid): re-parent it (microversion 1.37).
            if prov.parent_uuid is None or self.provider(prov.uuid) is None:
                raise
            self._update_provider(prov)
            return None
        # A new provider holds nothing: no need to read it back.
        self._content[prov.uuid] = (created['generation'], {}, set())
        return created['generation']

    def _update_provider(self, prov):
        body = {'name': prov.name}
        if prov.parent_uuid:
            body['parent_provider_uuid'] = prov.parent_uuid
        self._request('PUT', '/resource_providers/%s' % prov.uuid, json=body)

    def _read_content(self, uuid, generation):
        """``(generation, inventories, traits)`` of a provider.

        Served from what this client last saw when ``generation`` (from a
        provider listing) is still that generation: Placement bumps it on
        every change of inventories or traits, so the copy is current.
        """
        seen = self._content.get(uuid)
        if seen is not None and generation is not None and (
                seen[0] == generation):
            return seen
        for _ in range(self.max_retries + 1):
            inv_gen, inventories = self.inventories(uuid)
            traits_gen, traits = self.traits(uuid)
            if inv_gen == traits_gen:
                self._content[uuid] = (inv_gen, inventories, traits)
                return self._content[uuid]
        raise exception.PlacementConflict(
            method='GET', url=self.endpoint + '/resource_providers/' + uuid,
            status=409, code=CONCURRENT_UPDATE,
            detail='the provider kept changing while being read')

    def _put_inventories(self, uuid, generation, inventories):
        body = self._request(
            'PUT', '/resource_providers/%s/inventories' % uuid,
            json={'resource_provider_generation': generation,
                  'inventories': inventories}).json()
        return body['resource_provider_generation'], body['inventories']

    def _put_traits(self, uuid, generation, traits):
        body = self._request(
            'PUT', '/resource_providers/%s/traits' % uuid,
            json={'resource_provider_generation': generation,
                  'traits': sorted(traits)}).json()
        return body['resource_provider_generation'], set(body['traits'])

    def _sync_content(self, uuid, generation, inventory_target, traits_target,
                      report):
        """Write a provider's inventories and traits where they differ.

        ``inventory_target(current)`` / ``traits_target(current)`` return
        what the provider must hold (None: leave as is). A generation
        conflict re-reads the provider and tries again, at most
        ``max_retries`` times. Returns True if something was written.
        """
        changed = False
        for tries in range(self.max_retries + 1):
            try:
                gen, inventories, traits = self._read_content(uuid,
                                                              generation)
                target = inventory_target(inventories)
                if target is not None and (
                        _normalized(target) != _normalized(inventories)):
                    gen, inventories = self._put_inventories(uuid, gen,
                                                             target)
                    self._content[uuid] = (gen, inventories, traits)
                    changed = True
                target = traits_target(traits)
                if target is not None and target != traits:
                    gen, traits = self._put_traits(uuid, gen, target)
                    self._content[uuid] = (gen, inventories, traits)
                    changed = True
                return changed
            except exception.PlacementConflict as exc:
                self._content.pop(uuid, None)
                generation = None
                if exc.code != CONCURRENT_UPDATE or tries == self.max_retries:
                    raise
                LOG.debug('Generation conflict on %s, retrying: %s',
                          uuid, exc)
                report.retries += 1

    def _remove_provider(self, prov, has_children, report):
        uuid, name = prov['uuid'], prov['name']
        if has_children:
            report.kept[name] = 'it has child providers'
        else:
            allocations = self.provider_allocations(uuid)
            if allocations:
                report.kept[name] = 'consumers %s hold allocations on it' % (
                    ', '.join(sorted(allocations)))
            else:
                try:
                    self._request('DELETE', '/resource_providers/%s' % uuid,
                                  ok=(204,))
                    report.deleted.append(name)
                    return
                except exception.PlacementConflict as exc:
                    report.kept[name] = exc.detail
        if self._sync_content(uuid, prov['generation'], _fully_reserved,
                              lambda traits: None, report):
            report.updated.append(name)
        LOG.warning('Provider %s (%s) left the host but is kept: %s',
                    name, uuid, report.kept[name])

    # -- scheduling ----------------------------------------------------------

    def allocation_candidates(self, resources=None, required=(), in_tree=None,
                              limit=None, group_policy=None, groups=None):
        """GET /allocation_candidates; returns Placement's body.

        ``resources`` and ``required`` form the unnumbered group;
        ``in_tree`` restricts it, or every numbered group when there are
        no unnumbered resources.
        ``groups`` maps a suffix (``1``, ``_NIC``; ``''`` is the unnumbered
        group) to ``{'resources': {rc: n}, 'required': [trait,
        '!forbidden'], 'in_tree': uuid}`` or simply to ``{rc: n}`` (the
        shape of ``flavor.FlavorRequest.resource_groups``), giving
        ``resources1=CUSTOM_MLX5:1``. Placement requires ``group_policy``
        (``none``/``isolate``) with two or more numbered groups.
        """
        resources = dict(resources or {})
        required = list(required)
        numbered = []
        for suffix, group in (groups or {}).items():
            if 'resources' not in group:
                group = {'resources': group}
            if str(suffix):
                numbered.append((str(suffix), group))
            else:
                resources.update(group['resources'])
                required.extend(group.get('required', ()))
                in_tree = group.get('in_tree', in_tree)
        params = []
        if resources:
            params.append(('resources', _resources_param(resources)))
            if required:
                params.append(('required', ','.join(required)))
            if in_tree:
                params.append(('in_tree', str(in_tree)))
        elif required:
            raise exception.Invalid(
                reason='required traits %s need unnumbered resources; put '
                       'them in a numbered group' % ','.join(required))
        for suffix, group in sorted(numbered):
            params.append(('resources' + suffix,
                           _resources_param(group['resources'])))
            if group.get('required'):
                params.append(('required' + suffix,
                               ','.join(group['required'])))
            # Placement takes a lone in_tree for a resourceless group:
            # without unnumbered resources, every group gets it.
            group_tree = group.get('in_tree') or (
                None if resources else in_tree)
            if group_tree:
                params.append(('in_tree' + suffix, str(group_tree)))
        if group_policy:
            params.append(('group_policy', group_policy))
        if limit is not None:
            params.append(('limit', str(int(limit))))
        return self._get('/allocation_candidates', params=params)

    def claim(self, consumer_uuid, allocation_request, project_id, user_id,
              consumer_generation=None, consumer_type='INSTANCE'):
        """Write one of ``allocation_requests`` for a consumer.

        ``consumer_generation`` None means "a new consumer": Placement
        answers 409 (PlacementConflict) if the consumer already has
        allocations. Pass ``get_allocations(c)['consumer_generation']`` to
        replace existing allocations. 409 is also the answer when the
        capacity is gone; neither is retried here.
        """
        body = {
            'allocations': {
                rp: {'resources': dict(alloc['resources'])}
                for rp, alloc in allocation_request['allocations'].items()},
            'consumer_generation': consumer_generation,
            'project_id': project_id,
            'user_id': user_id,
            'consumer_type': consumer_type,
        }
        if allocation_request.get('mappings'):
            body['mappings'] = allocation_request['mappings']
        self._request('PUT', '/allocations/%s' % consumer_uuid, json=body,
                      ok=(204,))

    def delete_allocations(self, consumer_uuid):
        """Drop every allocation of a consumer; False if it had none."""
        try:
            self._request('DELETE', '/allocations/%s' % consumer_uuid,
                          ok=(204,))
        except exception.PlacementError as exc:
            if exc.status == 404:
                return False
            raise
        return True
