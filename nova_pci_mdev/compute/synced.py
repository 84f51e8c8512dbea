"""A sync only when its input changed: the digest of what it reads.

Every operation of :class:`~nova_pci_mdev.compute.host.ComputeHost` syncs the
tracker with the hypervisor. The records a sync applies are a pure
function of its input: the host's unparsed listing
(``Host.discovery_input``: node-device XML, mdev activity, emulated mdevs),
the compute node name, the settings, the slots instances hold, the
``nvidia/`` state of NVIDIA vGPU VFs and the code that turns them into
records and applies them. When the digest of that
input equals the one recorded by the last sync that committed, that sync's
result is already in the store, and syncing again would change nothing; so
the listing is neither parsed nor built into records, and the tracker is
used as loaded. What a display needs of the skipped records is recorded
with the digest (the records no device spec covers, the node devices
discovery left out, and the :mod:`~nova_pci_mdev.conf.host_checks`
problems of the configuration on them).

Invariants:

* The note is written in the same transaction as the sync's changes: a
  rolled-back session leaves the previous note, whose digest no longer
  matches if the input changed.
* Anything the records depend on is in the digest, the code's version
  included (:data:`RECORDS_VERSION` and the package version), so that a
  new version never trusts an old note. Claims and releases change no record
  (only statuses and owners, which a sync never takes from a record):
  skipping a sync is exactly what an unchanged sync would have done.
* A held slot enters the digest only while the host does not list its
  mdev (``Host.listed_mdevs``, which may list fewer than there are, never
  more), or lists it under another parent or type: records read held
  slots only for the first, the tracker holds the second in place.
"""

import dataclasses
import functools
import hashlib
import importlib.metadata

from nova_pci_mdev import exception
from nova_pci_mdev.conf import host_checks
from nova_pci_mdev.pci import device_table
from nova_pci_mdev.pci import manager
from nova_pci_mdev.pci import stats as pci_stats
from nova_pci_mdev.virt.libvirt.nvidia import vf as nvidia_vf

#: The version of what turns a sync's input into records and applies them
#: (records, the tracker's sync, the whitelist, the slots). Bump it with
#: any change to them that could give other records or statuses from the
#: same input: a note of another version is never trusted.
RECORDS_VERSION = '1'


@functools.lru_cache(maxsize=1)
def code_version():
    """``RECORDS_VERSION`` and the installed package's version: a note
    written by other code is never trusted."""
    try:
        package = importlib.metadata.version('nova-pci-mdev')
    except importlib.metadata.PackageNotFoundError:
        package = 'not installed'
    return '%s/%s' % (RECORDS_VERSION, package)


def settings_digest(settings):
    """What of the settings records and syncs read, as a string."""
    specs = []
    for spec in settings.whitelist.specs:
        address = spec.address
        shown = (repr(address) if type(address).__repr__ is not object.__repr__
                 else [r.pattern for r in getattr(address, 'regexes', ())])
        specs.append((spec.position, spec.source, spec.devname, str(shown),
                      sorted(spec.tags.items())))
    return repr((specs, tuple(settings.enabled_mdev_types),
                 sorted((k, repr(v)) for k, v in settings.mdev_types.items())))


def input_key(host, source, settings, held, moved=()):
    """The digest of one sync's input (see the module docstring).

    Held slots count only while the host does not list their mdev, or
    lists it under another parent or type (``moved``: their UUIDs; the
    tracker holds them in place, :mod:`.pci.manager`): those are the only
    ways they change what a sync does, so that a claim or a release of an
    existing mdev changes no digest.
    """
    listed = host.listed_mdevs(source)
    moved = set(moved)
    unlisted = sorted(repr(slot) for slot in held
                      if slot[0] not in listed or slot[0] in moved)
    hasher = hashlib.sha256()
    hasher.update(code_version().encode('utf-8'))
    hasher.update(repr((host.hostname, settings_digest(settings),
                        unlisted)).encode('utf-8', 'surrogatepass'))
    host.digest_input(source, hasher)
    return hasher.hexdigest()


@dataclasses.dataclass
class Outcome:
    report: manager.SyncReport
    records: list | None    # the records applied (None: sync skipped)
    unlisted: list          # records no device spec covers
    problems: list          # conf.host_checks problems of the records
    vgpu_states: dict       # VF address -> nvidia_vf.VfState read
    note: dict | None       # to record, when the sync ran


def still_applied(tx, host, vgpus, settings, held, moved=()):
    """The :class:`Outcome` of the last sync (``report`` None) when what
    the host lists now is the input it applied (:func:`bring_in_line`
    would skip the sync), else None: then the devices table may not say
    what the host has, and only a session's sync can tell."""
    return _noted(tx, host, vgpus, settings, held, moved,
                  host.discovery_input())[1]


def noted(tx, tracker_devices, host, vgpus, settings, held, moved=()):
    """What :func:`bring_in_line` returns when it skips the sync (the
    note's :class:`Outcome`, ``report`` naming the devices in use that are
    missing, of ``tracker_devices``), or None when it would sync. Asked
    before a tracker is built, so that a session that will not sync may
    load only the devices it touches (``tracker_devices`` then are those
    in use: the only ones that can be missing)."""
    done = still_applied(tx, host, vgpus, settings, held, moved)
    if done is not None:
        done.report = manager.SyncReport((), (), (), tuple(
            dev.address for dev in tracker_devices
            if device_table.is_missing(dev)))
    return done


def _noted(tx, host, vgpus, settings, held, moved, source):
    """``(base digest, Outcome or None)``: the Outcome of the note in
    ``tx`` when it was written for this very input (``report`` None)."""
    base = input_key(host, source, settings, held, moved)
    note = tx.sync_note() or {}
    if note.get('base') != base:
        return base, None
    candidates = list(note.get('vf_candidates') or ())
    states = vgpus.states(candidates) if candidates else {}
    if note.get('key') != _with_states(base, states):
        return base, None
    host.left_out = _warnings_from(note.get('left_out') or ())
    return base, Outcome(None, None, list(note.get('unlisted') or ()),
                         _problems_from(note.get('problems') or ()),
                         states, None)


def _with_states(base, states):
    hasher = hashlib.sha256(base.encode('ascii'))
    hasher.update(repr(sorted(states.items())).encode('utf-8',
                                                      'surrogatepass'))
    return hasher.hexdigest()


def bring_in_line(tx, tracker, host, vgpus, settings, held, moved=()):
    """Sync ``tracker`` with what the host lists now, unless the note of
    the last sync (in the store transaction ``tx``) says that this very
    input was applied already; a sync that ran records its note in ``tx``.

    ``vgpus`` (a :class:`~.nvidia.vgpu_vfs.VgpuVfManager`) gives the
    records the vGPU view of NVIDIA VFs, as ``vgpus.view`` does; their
    ``nvidia/`` states are read once and are part of the input: the note
    keeps the VFs to read, since finding them takes records. ``moved``:
    UUIDs of held slots the host lists elsewhere (:func:`input_key`).
    """
    source = host.discovery_input()
    base, noted = _noted(tx, host, vgpus, settings, held, moved, source)
    if noted is not None:
        kept = tuple(address for address, dev in tracker.devices.items()
                     if device_table.is_missing(dev))
        noted.report = manager.SyncReport((), (), (), kept)
        return noted
    raw = host.discover(settings, held=held, source=source)
    candidates = (nvidia_vf.candidate_addresses(raw)
                  if vgpus.sysfs is not None else [])
    states = vgpus.states(candidates) if candidates else {}
    records = nvidia_vf.apply(raw, states, settings) if states else raw
    del raw
    report = tracker.sync(records)
    tracked = tracker.devices
    unlisted = [r for r in records if r['address'] not in tracked]
    problems = host_checks.problems(settings, records, host.hostname,
                                    left_out=host.left_out)
    note = {
        'base': base, 'key': _with_states(base, states),
        'vf_candidates': candidates, 'unlisted': unlisted,
        'problems': [_problem_doc(p) for p in problems],
        'left_out': [_problem_doc(p) for p in host.left_out]}
    tx.put_sync_note(note)
    return Outcome(report, records, unlisted, problems, states, note)


def _write_devices(tx, tracker):
    """Write the devices ``tracker`` changed (only those whose fields
    differ from their rows: a relative a claim touched without setting
    anything is not written again) and delete the ones it deleted; return
    whether anything was written."""
    changed, deleted = tracker.pop_changes()
    changed = [d for d in changed if d.obj_what_changed()]
    tx.save_devices(changed)
    tx.delete_devices(deleted)
    for dev in changed:
        dev.obj_reset_changes()
    return bool(changed or deleted)


def save(tx, tracker):
    """Write what a session changed in ``tracker`` (:func:`_write_devices`)
    and the pools its devices make (:meth:`.store.rows.Transaction.pools`,
    what views read without building a tracker) when anything was written
    or none are recorded."""
    if _write_devices(tx, tracker) or tx.pools() is None:
        tx.put_pools(tracker.stats.to_pool_list())


def save_part(tx, tracker, before):
    """:func:`save` for a tracker that holds only part of the devices
    table (whole trees, :meth:`.store.rows.Transaction.load_trees`): the
    devices it changed, and the recorded pools adjusted by what its own
    pools changed since they counted ``before``
    (:meth:`.pci.stats.PciDeviceStats.counts`): every device whose place
    in a pool can have changed is in those trees."""
    _write_devices(tx, tracker)
    after = tracker.stats.counts()
    if after != before:
        try:
            tx.put_pools(pci_stats.adjusted(tx.pools(), before, after))
        except ValueError:
            # Not the pools of these devices: recorded pools are only
            # ever a summary, so none are kept (the next session that
            # loads every device records them again).
            tx.forget_pools()


def _problem_doc(problem):
    return {'class': type(problem).__name__, 'kwargs': {
        k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
        for k, v in problem.kwargs.items()}}


def _warnings_from(docs):
    """Discovery's warnings a note recorded (node devices left out, values
    capped): host description warnings of this version only."""
    out = []
    for doc in docs:
        cls = getattr(exception, str(doc.get('class')), None)
        if (isinstance(cls, type)
                and issubclass(cls, exception.HostDescriptionInvalid)
                and getattr(cls, 'severity', None) == 'warning'):
            out.append(cls(**dict(doc.get('kwargs') or {})))
    return out


def _problems_from(docs):
    """The problems a note recorded; a class this version lacks is left
    out (the code digest makes that a note of another version anyway)."""
    out = []
    for doc in docs:
        cls = getattr(exception, str(doc.get('class')), None)
        if isinstance(cls, type) and issubclass(cls, exception.ConfigError):
            out.append(cls(**dict(doc.get('kwargs') or {})))
    return out
