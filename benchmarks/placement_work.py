"""How much work Placement 16 does for one query of the benchmark, computed
before the query is sent; standard library only, no Placement import.

``GET /allocation_candidates`` for ``vGPU:N`` gets, per host, one
allocation request per provider for each one-unit group and one for the
root group; ``placement.objects.allocation_candidate._merge_candidates``
then walks the product of those lists host by host (depth-first) or
round-robin (breadth-first), keeps the products that pass
``group_policy`` and the capacity check, and adds each kept one to a set.
Its cost is three counts, which this module computes exactly from the
tree (:mod:`benchmarks.placement_trees`), the query and the settings:

* ``products``: complete products ``_merge_candidates`` takes from the
  generator (``_satisfies_group_policy`` runs once for each);
* ``partials``: partial products the wide-tree generator
  (``util.filtered_product``, ``optimize_for_wide_provider_trees``)
  checks before extending them; 0 with ``itertools.product``;
* ``comparisons``: ``AllocationRequest.__eq__`` calls of that set, at
  least. The stock ``__hash__`` ignores the group mappings, so two kept
  products on the same providers with the same amounts share a hash and
  every new one is compared with each earlier one: ``k * (k - 1) / 2``
  for ``k`` such products (``patches/placement/0001`` hashes the mappings
  too: 0). That is the number of compared pairs; CPython's probe
  sequence can pass one entry more than once, depending on the hash seed
  (string hashes are salted per process) and the table's size, so the
  ``__eq__`` calls made are this many or more (up to four times as many
  seen in the test's small tables, where probes revisit slots most).

How the walk goes (Placement 16.0.0): without
``optimize_for_wide_provider_trees`` every product of every host is
generated (``itertools.product``), ``isolate`` and capacity are checked on
complete products, and ``max_allocation_candidates`` (default -1) stops
the walk once the set holds that many. With it, a partial product that
exceeds a provider's capacity is cut with everything that extends it, and
with ``patches/placement/0002`` a partial product in which two groups share
a provider is cut too under ``isolate`` (without it ``isolate`` is still
checked on complete products only). A host whose providers' capacity
cannot hold the request at all is skipped before its product starts.
``limit`` only slices the final list.

Invariants: the providers of one host that can serve a group are
interchangeable (same capacity and traits: true of every shape of the
benchmark; :func:`host_model` refuses a tree where it is not), the groups
are identical (N groups of one unit, or one group of N), and the counts
are exact (comparisons: the pairs compared, a lower bound of the calls),
not estimates;
``nova_pci_mdev/tests/functional/test_placement_work.py`` checks them
against the calls a profiled Placement makes.

:func:`estimate` turns a :class:`Work` into seconds with per-unit costs
of about three times the highest CPU costs measured on 2026-12-02
(RESULTS.md of 0a517ad: 2-core machine shared at load 6-8), so that a
query whose estimate fits in half its bound answers within the bound; the
runner sends no other query.
"""

import collections
import dataclasses
import functools
import math
import re
from fractions import Fraction

from benchmarks import placement_trees as trees

#: Placement 16's defaults for the options the benchmark sets.
DEFAULTS = {'max_allocation_candidates': -1,
            'allocation_candidates_generation_strategy': 'depth-first',
            'optimize_for_wide_provider_trees': False}
#: Seconds per unit of work. The 2026-12-02 run's CPU times over these
#: counts give 24 us per complete product (T4-like vGPU:8 isolate,
#: defaults: 65,536 products, 1.6 s), 46 us when each is kept in a set
#: (the same with 0001 and no isolate: 3.0 s), about 3 us per partial
#: product (A100-like per GPU vGPU:8 isolate, wide: 671,098 products, 1.44
#: million partial products, 499,500 comparisons, 22.6 s) and 3 us per
#: comparison (per GPU vGPU:4 on ten hosts, defaults: 40,960 products,
#: 311,640 comparisons, 2.0 s). Wall time is up to 2.6 times the CPU time
#: on this shared machine (the T4-like vGPU:8 with 0001 beside the per-patch
#: check: 3.1 s of CPU, 8.0 s of wall), so the costs below are about three
#: times the highest of those; ``base`` (the SQL, the provider summaries and
#: the response) was at most 0.7 s of wall.
COSTS = {'products': 150e-6, 'partials': 10e-6, 'comparisons': 10e-6,
         'base': 1.0}
_GROUP_KEY = re.compile(r'^(resources|required|member_of|in_tree)(.*)$')


@dataclasses.dataclass(frozen=True)
class Host:
    """One host as the candidate generation sees it: ``providers``
    interchangeable providers of which each holds at most ``per_provider``
    groups (capacity and max_unit over the group's amount)."""
    providers: int
    per_provider: int


@dataclasses.dataclass(frozen=True)
class Request:
    """``groups`` identical granular groups of ``amount`` units, the root
    group at position ``root_level`` of the product (Placement's group
    order is the order of the query's keys), ``isolate`` or not."""
    groups: int
    amount: int
    root_level: int
    isolate: bool


@dataclasses.dataclass(frozen=True)
class Work:
    products: int
    partials: int
    comparisons: int
    kept: int            # candidates in the set when the walk ends
    candidates: int      # in the response (``limit`` applied)

    def as_dict(self):
        return dataclasses.asdict(self)


def estimate(work):
    """Seconds of wall time ``work`` may take at :data:`COSTS`."""
    return COSTS['base'] + sum(getattr(work, name) * cost
                               for name, cost in COSTS.items()
                               if name != 'base')


def host_model(providers, rc, amount):
    """The :class:`Host` of one host's providers (dicts as
    :func:`trees.host_tree` makes them) for groups of ``amount`` of
    ``rc``; ValueError naming the providers when they are not
    interchangeable."""
    fits = {}
    for prov in providers:
        inv = prov['inventories'].get(rc)
        if not inv:
            continue
        capacity = int((inv['total'] - inv['reserved'])
                       * inv['allocation_ratio'])
        usable = min(capacity, inv['max_unit'])
        if usable >= amount:
            fits[prov['name']] = (usable // amount, tuple(prov['traits']))
    if len(set(fits.values())) > 1:
        raise ValueError(
            'providers of %s differ in capacity or traits (%s): the count '
            'assumes interchangeable providers' % (rc, ', '.join(
                '%s: %s' % item for item in sorted(fits.items()))))
    per = next(iter(fits.values()))[0] if fits else 0
    return Host(len(fits), per)


def request_model(params):
    """The :class:`Request` of a query's parameters (``(key, value)`` in
    the order sent, as :func:`trees.query_params` gives them)."""
    order, amounts, policy = [], {}, None
    for key, value in params:
        if key == 'group_policy':
            policy = value
        match = _GROUP_KEY.match(key)
        if not match:
            continue
        suffix = match.group(2)
        if suffix not in order:
            order.append(suffix)
        if match.group(1) == 'resources' and suffix:
            (rc_amount,) = value.split(',')
            amounts[suffix] = int(rc_amount.split(':')[1])
    if len(set(amounts.values())) != 1:
        raise ValueError('the granular groups must ask for the same amount, '
                         'got %s' % sorted(amounts.items()))
    return Request(groups=len(amounts), amount=next(iter(amounts.values())),
                   root_level=order.index(''),
                   isolate=policy == 'isolate')


class _Tree:
    """The product of one host, as a prefix tree: level ``i`` places group
    ``i`` (or the root group at ``request.root_level``). A node's state is
    how many groups each provider holds; with interchangeable providers
    the counts below a node depend only on the sorted state."""

    def __init__(self, host, request, optimize, prune_isolate):
        self.host, self.request = host, request
        self.levels = request.groups + 1
        self.cap = host.per_provider
        # what filtered_product cuts (itertools.product cuts nothing)
        self.cut = None
        if optimize:
            self.cut = 1 if (request.isolate and prune_isolate) else self.cap
        self.checked = optimize
        self.accept = 1 if request.isolate else self.cap
        self.count = functools.lru_cache(maxsize=None)(self._count)

    def children(self, level, state):
        """``[(state, cut)]`` of a node's children in Placement's order
        (``state`` a tuple of counts per provider)."""
        if level == self.request.root_level:
            return [(state, False)]
        out = []
        for i in range(self.host.providers):
            child = state[:i] + (state[i] + 1,) + state[i + 1:]
            out.append((child, self.cut is not None and
                        child[i] > self.cut))
        return out

    def accepted(self, state):
        return max(state, default=0) <= self.accept

    def _count(self, level, key):
        """(partials, leaves, accepted) below a node of sorted state
        ``key`` at ``level``."""
        if level == self.levels:
            return (0, 1, int(self.accepted(key)))
        if level == self.request.root_level:
            partials, leaves, acc = self.count(level + 1, key)
            return (partials + self.checked, leaves, acc)
        partials = self.host.providers if self.checked else 0
        leaves = acc = 0
        seen = collections.Counter(key)
        for value, times in seen.items():
            child = list(key)
            child[child.index(value)] += 1
            if self.cut is not None and value + 1 > self.cut:
                continue
            p, l, a = self.count(level + 1, tuple(sorted(child)))
            partials, leaves, acc = (partials + times * p,
                                     leaves + times * l, acc + times * a)
        return (partials, leaves, acc)

    def total(self):
        return self.count(0, self.start())

    def start(self):
        return tuple([0] * self.host.providers)

    def node(self, level, state):
        return self.count(level, tuple(sorted(state)))

    def prefix(self, leaves):
        """(partials, accepted) when the walk has yielded its first
        ``leaves`` leaves (filtered_product checks lazily)."""
        partials = acc = 0
        level, state, left = 0, self.start(), leaves
        while left:
            for child, cut in self.children(level, state):
                partials += self.checked
                if cut:
                    continue
                p, l, a = self.node(level + 1, child)
                if l < left or (l == left and level + 1 == self.levels):
                    # a subtree wholly before the stop; one whose last
                    # leaf is the stop is entered instead, since the
                    # checks after that leaf are not made
                    partials, acc, left = partials + p, acc + a, left - l
                    if not left:
                        break
                    continue
                level, state = level + 1, child
                break
            else:
                break           # fewer leaves than asked: all of them
        return partials, acc

    def accepted_states(self, leaves):
        """The final states of the accepted leaves among the first
        ``leaves`` (each a tuple of counts per provider)."""
        found = []

        def walk(level, state, left):
            if level == self.levels:
                if self.accepted(state):
                    found.append(state)
                return 1
            used = 0
            for child, cut in self.children(level, state):
                if cut or used == left:
                    continue
                _, l, a = self.node(level + 1, child)
                if a == 0:
                    used += min(l, left - used)
                    continue
                used += walk(level + 1, child, min(l, left - used))
            return used

        walk(0, self.start(), leaves)
        return found


def _class_counts(tree):
    """(kept, sum over hash classes of k*(k-1)/2) over a whole host: a
    class is one final state, held by groups!/prod(count!) kept leaves."""
    per, g = tree.accept, tree.request.groups
    one, sq = [Fraction(0)] * (g + 1), [Fraction(0)] * (g + 1)
    one[0] = sq[0] = Fraction(1)
    for _ in range(tree.host.providers):
        new_one, new_sq = [Fraction(0)] * (g + 1), [Fraction(0)] * (g + 1)
        for s in range(g + 1):
            if not one[s]:
                continue
            for k in range(0, min(per, g - s) + 1):
                f = math.factorial(k)
                new_one[s + k] += one[s] / f
                new_sq[s + k] += sq[s] / (f * f)
        one, sq = new_one, new_sq
    kept = one[g] * math.factorial(g)
    squares = sq[g] * math.factorial(g) ** 2
    return int(kept), int((squares - kept) / 2)


def _pairs(states):
    return sum(k * (k - 1) // 2
               for k in collections.Counter(states).values())


def predict(hosts, request, settings=None, patches=0, limit=None):
    """The :class:`Work` of one query on ``hosts`` (:class:`Host`, in the
    order Placement walks them: by root), with Placement options
    ``settings`` (missing ones: :data:`DEFAULTS`) and the first ``patches``
    patches of ``patches/placement/``; ``limit`` as sent."""
    options = dict(DEFAULTS, **(settings or {}))
    optimize = options['optimize_for_wide_provider_trees']
    strategy = options['allocation_candidates_generation_strategy']
    if strategy not in ('depth-first', 'breadth-first'):
        raise ValueError('unknown generation strategy %r' % strategy)
    stop = options['max_allocation_candidates']
    if all(h.providers == 0 for h in hosts):
        return Work(0, 0, 0, 0, 0)  # a group without candidates: no walk
    live = [h for h in hosts if h.providers and (
        request.groups < 2 or
        h.providers * h.per_provider >= request.groups)]
    walks = [_Tree(h, request, optimize, patches >= 2) for h in live]
    totals = [w.total() for w in walks]
    taken = _taken(walks, totals, strategy, stop)
    products = partials = kept = comparisons = 0
    for walk, whole, n in zip(walks, totals, taken):
        if n == whole[1]:
            p, a = whole[0], whole[2]
            pairs = _class_counts(walk)[1]
        else:
            p, a = walk.prefix(n)
            pairs = _pairs(walk.accepted_states(n))
        products, partials, kept = products + n, partials + p, kept + a
        if patches < 1:
            comparisons += pairs
    candidates = kept if not limit or limit >= kept else limit
    return Work(products, partials, comparisons, kept, candidates)


def _taken(walks, totals, strategy, stop):
    """How many leaves the walk takes from each host before the set holds
    ``stop`` candidates (all of them if it never does)."""
    leaves = [t[1] for t in totals]
    if stop < 0 or sum(t[2] for t in totals) < stop:
        return leaves
    if strategy == 'depth-first':
        taken, need = [], stop
        for walk, total in zip(walks, totals):
            if need <= 0:
                taken.append(0)
            elif total[2] < need:
                taken.append(total[1])
                need -= total[2]
            else:
                taken.append(_leaves_for(walk, total[1], need))
                need = 0
        return taken

    def kept_after(rounds):
        return sum(walk.prefix(min(rounds, n))[1]
                   for walk, n in zip(walks, leaves))
    low, high = 0, max(leaves)
    while low < high:          # the first round at whose end the set is full
        mid = (low + high) // 2
        if kept_after(mid) >= stop:
            high = mid
        else:
            low = mid + 1
    taken = [min(low - 1, n) for n in leaves]
    kept = kept_after(low - 1)
    for i, (walk, n) in enumerate(zip(walks, leaves)):
        if low > n:
            continue
        taken[i] = low
        kept += walk.prefix(low)[1] - walk.prefix(low - 1)[1]
        if kept >= stop:
            break
    return taken


def _leaves_for(walk, leaves, need):
    """The fewest leaves of ``walk`` holding ``need`` accepted ones."""
    low, high = 1, leaves
    while low < high:
        mid = (low + high) // 2
        if walk.prefix(mid)[1] >= need:
            high = mid
        else:
            low = mid + 1
    return low


def for_case(shape, model, n, policy, translation, settings, patches):
    """:func:`predict` for one case of :mod:`benchmarks.placement`."""
    params = trees.query_params(shape, n, policy, translation)
    request = request_model(params)
    rc = trees.resource_class(shape.mdev_type)
    hosts = [host_model(trees.host_tree(shape, model, h), rc, request.amount)
             for h in range(shape.hosts)]
    limit = int(dict(params)['limit'])
    return predict(hosts, request, settings, patches, limit)
