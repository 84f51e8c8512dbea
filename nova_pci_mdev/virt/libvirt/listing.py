"""What libvirt said about the node devices, before any parsing.

A :class:`Listing` is one ``listAllDevices``: per node device its name, its
``XMLDesc(0)`` and, for what may be an mdev, ``isActive()`` (None for the
rest). Parsing (:mod:`.nodedev`) and record building (:mod:`.records`)
are pure functions of it and of the configuration, so a digest of the
listing says whether they can give anything new: :func:`digest` feeds it
to a hash. Pure: no libvirt, no I/O.
"""

import typing


class Entry(typing.NamedTuple):
    name: str | None        # None for documents listed by a sidecar
    xml: str
    active: bool | None     # isActive() of a possible mdev, else None


def _order(entry):
    return (entry.name or '', repr(entry.xml) if not isinstance(
        entry.xml, str) else entry.xml)


def may_be_mdev(xml):
    """True if the XML can be a mediated device (``capability type=
    'mdev'``, either quote): only those need ``isActive()``."""
    if not isinstance(xml, str):
        return True             # the parser will say what is wrong
    return "'mdev'" in xml or '"mdev"' in xml


def digest(entries, hasher):
    """Feed ``entries`` (:class:`Entry`) to ``hasher`` (a hashlib object):
    equal digests, equal listings (names, documents, active flags) in any
    order (libvirt's test driver lists in a different order in every
    process; discovery's records do not depend on it)."""
    for name, xml, active in sorted(entries, key=_order):
        if isinstance(xml, str):
            body = xml.encode('utf-8', 'surrogatepass')
        else:                   # what a driver should not hand out
            body = repr(xml).encode('utf-8', 'surrogatepass')
        hasher.update(('%s\0%s\0%s\0%d\0' % (
            name, active, type(xml).__name__, len(body))).encode(
                'utf-8', 'surrogatepass'))
        hasher.update(body)
    return hasher
