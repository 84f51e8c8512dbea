"""XML from libvirt (or a user's file) parsed without DTDs or entities.

Pure, standard library only: :func:`parse_xml` is the one XML reader of the
project (node devices, host capabilities, guest XML). It refuses what
libvirt never writes (a DOCTYPE, entity declarations, external entities),
which closes the "billion laughs" and external-entity holes, and reports
every failure through the caller's ``on_error`` so that the error names
the document.
"""

from xml.etree import ElementTree
from xml.parsers import expat


class _Refused(Exception):
    """Raised from expat handlers; carries the reason."""


def _refuse(what):
    def handler(*args):
        raise _Refused('%s is refused (no DTDs or entities in libvirt XML)'
                       % what)
    return handler


_REFUSE_DOCTYPE = _refuse('a DOCTYPE declaration')
_REFUSE_ENTITY = _refuse('an ENTITY declaration')
_REFUSE_EXTERNAL = _refuse('an external entity reference')


#: The deepest guest XML read: libvirt's domain XML nests about eight
#: deep; ElementTree writes (and copies) a tree by recursion, which fails
#: near the interpreter's limit of 1,000.
GUEST_MAX_DEPTH = 100


class _Depth:
    """Start/end handlers that refuse elements nested deeper than
    ``limit`` before the builder sees them."""

    def __init__(self, builder, limit):
        self.builder, self.limit, self.level = builder, limit, 0

    def start(self, tag, attrs):
        self.level += 1
        if self.level > self.limit:
            raise _Refused('<%s> is nested more than %d elements deep '
                           '(the most read)' % (tag, self.limit))
        return self.builder.start(tag, attrs)

    def end(self, tag):
        self.level -= 1
        return self.builder.end(tag)


def parse_xml(text, on_error, keep_comments=False, max_depth=None):
    """Parse ``text`` into an ``Element`` without any entity expansion.

    A DOCTYPE, an entity declaration or an external entity reference is
    refused: libvirt never produces them, and refusing the DTD outright
    (instead of only not expanding it) closes the "billion laughs" and
    external entity holes with the standard library alone. Only the five
    predefined XML entities and character references are decoded.
    ``on_error(reason)`` must return the exception to raise. With
    ``keep_comments`` the comments inside the root element stay in the
    tree (``ElementTree.Comment`` nodes). With ``max_depth`` a document
    whose elements nest deeper is refused (for trees that are written back
    or copied: both recurse); a document with fewer start tags than that
    is not counted.
    """
    if text is None or (isinstance(text, (str, bytes)) and not text.strip()):
        raise on_error('empty XML document')
    if not isinstance(text, (str, bytes)):
        raise on_error('expected an XML string, got %s' %
                       type(text).__name__)
    builder = ElementTree.TreeBuilder(insert_comments=keep_comments)
    parser = expat.ParserCreate()
    if keep_comments:
        parser.CommentHandler = builder.comment
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _REFUSE_DOCTYPE
    parser.EntityDeclHandler = _REFUSE_ENTITY
    parser.ExternalEntityRefHandler = _REFUSE_EXTERNAL
    handlers = builder
    if max_depth is not None and _start_tags(text) > max_depth:
        handlers = _Depth(builder, max_depth)
    parser.StartElementHandler = handlers.start
    parser.EndElementHandler = handlers.end
    parser.CharacterDataHandler = builder.data
    parser.buffer_text = True
    try:
        parser.Parse(text, True)
        return builder.close()
    except _Refused as exc:
        raise on_error(str(exc)) from None
    except expat.ExpatError as exc:
        raise on_error('malformed XML: %s' % exc) from None
    except UnicodeError as exc:
        raise on_error('XML text is not encodable as UTF-8 (lone '
                       'surrogate?): %s' % exc) from None


def _start_tags(text):
    """At least the number of start tags of ``text`` (every one begins
    with ``<``)."""
    return text.count(b'<' if isinstance(text, bytes) else '<')
