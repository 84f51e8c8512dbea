"""JSON option values (``device_spec``, ``alias``): decoding and showing.

:func:`load_json` decodes one option value, refusing a key that appears
twice in one object (``json`` would keep the last silently) and reporting
malformed text through the caller; it answers :data:`INVALID` then, never
None, which is what the JSON ``null`` decodes to (a value the callers
must refuse like Nova does, not skip); :func:`show` is the short printable form
of an offending value every message uses. Pure, no I/O.
"""

import json


def show(value, limit=200):
    """A short printable form of an offending value for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + '...'


class _Invalid(object):
    def __repr__(self):
        return '<invalid JSON>'


#: What :func:`load_json` answers for text it reported.
INVALID = _Invalid()


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def load_json(text, report):
    """Parse one option value as JSON; on failure ``report(value, rule)``
    and return :data:`INVALID`."""
    if not isinstance(text, str):
        report(show(text), 'expected a JSON string')
        return INVALID
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        report(show(text), 'key %s appears twice in one JSON object'
               % show(exc.args[0]))
    except (ValueError, RecursionError) as exc:
        report(show(text), 'malformed JSON (%s)' % (exc,))
    return INVALID
