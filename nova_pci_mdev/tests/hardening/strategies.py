"""Hypothesis strategies for hostile input.

``HOSTILE`` strings mix what breaks parsers and paths: separators of the
formats (``:`` ``.`` ``,`` ``=``), path syntax (``/`` ``..`` NUL), markup
(``<`` ``&`` quotes), oslo.config interpolation (``$``), whitespace and
newlines, Unicode digits that ``str.isdigit`` accepts but ``int`` may not
(``²``), full-width look-alikes, lone surrogates (which JSON can carry and
UTF-8 cannot encode), and very long runs. Hypothesis' default text
excludes surrogates, so they are added on purpose.
"""

import json

from hypothesis import strategies as st

#: Hand-picked troublemakers, tried first and mixed into everything else.
NASTY = (
    '', ' ', '\n', '\t', '\x00', '.', '..', '/', '../', '../../etc/passwd',
    '/etc/passwd', 'a/b', '..\\..', '\u2024\u2024', '\uff0e\uff0e\uff0f',
    '\u00b2', '\u0663', '\u00bd', '\u2160', '１２', '0x10', '-1', '1e3',
    '1_0', ' 7 ', '99999999999999999999', '9' * 5000, 'NaN', 'true',
    '$foo', '${bar}', '$$', '%s', '%(x)s', '{}', '[]', 'null',
    '<', '&amp;', '&e;', '"', "'", ']]>', '<!DOCTYPE x>', '\ufeff', '\u202e', 'mdev_', 'mtty', 'deadbeef-x',
    '0000:84:00.0', '0000:84:00.0\n', '0000:84:00.8', 'ffff:ff:1f.7',
    '4b20d080-1b54-4048-85b3-a6a62d165c01',
    '4B20D080-1B54-4048-85B3-A6A62D165C01\n', 'nvidia-35', 'nvidia-35/..',
    'i915-GVTg_V5_4', 'mlx5_core-local', 'a' * 129, 'm' * 65, '*', '?',
    '[!a]', 'VGPU', 'CUSTOM_', 'custom_x', 'required', 'mdev-vf', 'type-PF',
)

#: Lone surrogates: valid in a Python str and in JSON (``"\\ud800"``),
#: impossible to encode as UTF-8.
SURROGATES = ('\ud800', '\udfff', 'a\udc80b')

#: Characters hostile input is drawn from (besides all of Unicode).
_ALPHABET = ('0123456789abcdefABCDEF:.-_/*?[]!,=$%<>&"\' \n\t\x00'
             '\u00b2\u0663\uff10\uff0f\u2215\ufeff')


def _hostile(surrogates):
    chars = st.one_of(
        st.sampled_from(_ALPHABET + ('\ud800\udfff' if surrogates else '')),
        st.characters(blacklist_categories=() if surrogates else ('Cs',)))
    nasty = NASTY + (SURROGATES if surrogates else ())
    return st.one_of(
        st.sampled_from(nasty),
        st.text(chars, max_size=40),
        st.builds(lambda a, b: a + b, st.sampled_from(nasty),
                  st.text(chars, max_size=8)))


#: Hostile text, lone surrogates included (for parsers of JSON values).
hostile_text = _hostile(surrogates=True)
#: Hostile text that UTF-8 can encode (for XML and files: lone surrogates
#: have their own tests, so that they do not hide every other finding).
encodable_text = _hostile(surrogates=False)


def _scalar(text):
    return st.one_of(
        st.none(), st.booleans(),
        st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
        st.floats(allow_nan=True, allow_infinity=True), text)


#: JSON scalars as ``json.loads`` may hand them out (NaN and huge ints
#: included).
json_scalar = _scalar(hostile_text)
encodable_scalar = _scalar(encodable_text)


def json_value(keys=None, max_leaves=10, text=hostile_text):
    """Nested JSON values; dict keys from ``keys`` or hostile text."""
    key = st.sampled_from(keys) | text if keys else text
    return st.recursive(
        _scalar(text),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
            key, inner, max_size=5),
        max_leaves=max_leaves)


def dumps(value):
    """``json.dumps`` that keeps lone surrogates as escapes (valid JSON)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


def xml_escape(text):
    return (text.replace('&', '&amp;').replace('<', '&lt;')
            .replace('>', '&gt;').replace("'", '&apos;')
            .replace('"', '&quot;'))


#: Numbers as text: plain, hex, signed, padded, huge, and digits that
#: ``str.isdigit`` accepts but ``int`` refuses (superscripts) or accepts
#: although they are not ASCII (Arabic-Indic, full-width).
number_text = st.one_of(
    st.integers(-2, 2 ** 70).map(str),
    st.sampled_from(['0x10', '0X1F', '-0', '+1', ' 7 ', '1_0', '1e3', '',
                     '\u00b2', '\u0663', '\uff11', '\u0661\u0660', '\u2460',
                     '9' * 5000, '0' * 50 + '1', 'NaN']),
    st.text(st.sampled_from('0123456789\u00b2\u00b3\u0663\uff15x-'),
            min_size=1, max_size=6))

#: A value placed in XML: escaped (data) most of the time, raw (markup
#: injection) sometimes.
xml_value = st.one_of(
    encodable_text.map(xml_escape), encodable_text.map(xml_escape),
    encodable_text)
