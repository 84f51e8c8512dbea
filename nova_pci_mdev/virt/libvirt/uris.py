"""What a libvirt connection URI can be, and what to say when it is none.

libvirt opens a URI, ``driver[+transport]://[user@][host][:port]/path``
(``qemu:///system``, ``qemu+ssh://root@host/system``, ``test:///default``),
or the name of an alias of ``uri_aliases`` in libvirt.conf, which may hold
only letters, digits, ``_`` and ``-``. Anything else libvirt refuses with
"no connection driver available ... does not include a driver name",
which does not tell an operator who gave a file path what to type instead.

libvirt's test driver reads a host file named by the path of a ``test``
URI without a host part: ``test:///abs/host.xml`` (also ``test:/abs/...``)
is the file ``/abs/host.xml``, percent-escapes decoded, query and fragment
ignored, exactly as libvirt reads it; ``test:///default`` is the driver's
built-in host. ``test://name/...`` names a remote host ``name`` (libvirtd
there), not a file.

Invariants: :func:`problem` answers None for every value libvirt could
open (a URI with a scheme, or an alias name): only what libvirt would
refuse whatever its configuration is refused before it is asked.
:func:`host_file` names the file libvirt's test driver would read, or None.
"""

import os
import re
import urllib.parse

_SCHEME = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*:')
_ALIAS = re.compile(r'[A-Za-z0-9_-]+')
TEST_SCHEME = 'test'
TEST_DEFAULT = '/default'
#: What a connection may be, for messages.
ACCEPTED = ('accepted: a libvirt URI such as qemu:///system or '
            'qemu+ssh://HOST/system, test:///default, a host file as '
            'test:///ABSOLUTE/PATH/host.xml, or an alias of uri_aliases in '
            'libvirt.conf (letters, digits, _ and -)')


def _split_test(uri):
    """``urlsplit(uri)`` of a URI of the test driver (libvirt matches the
    scheme case-sensitively: ``TEST://`` goes to the remote driver), else
    None."""
    if not uri.startswith(TEST_SCHEME + ':'):
        return None
    try:
        return urllib.parse.urlsplit(uri)
    except ValueError:          # e.g. an unbalanced [ in the host part
        return None


def host_file(uri):
    """The host XML file libvirt's test driver reads for ``uri`` (an
    absolute path), or None when ``uri`` names no such file (another
    driver, a remote host, ``test:///default``)."""
    parts = _split_test(uri)
    if parts is None or parts.netloc:
        return None
    path = urllib.parse.unquote(parts.path)
    if not path.startswith('/') or path == TEST_DEFAULT:
        return None
    return path


def as_host_file_uri(path):
    """``test://<absolute path>``: how a host file is given (``~``
    expanded: libvirt would not)."""
    return 'test://' + urllib.parse.quote(
        os.path.abspath(os.path.expanduser(path)))


def problem(uri):
    """Why ``uri`` cannot open any libvirt connection (it has no scheme
    and is no alias name), with what to give instead; None when libvirt
    may open it."""
    if _SCHEME.match(uri) or _ALIAS.fullmatch(uri):
        return None
    if '/' in uri or uri.endswith('.xml'):
        return ('a file path is not a libvirt URI: a host file is given as '
                '%s; %s' % (as_host_file_uri(uri), ACCEPTED))
    return 'not a libvirt URI (no scheme such as qemu://); %s' % ACCEPTED


def hint(uri):
    """A note for an error libvirt raised opening ``uri``: what libvirt
    made of it when that may not be what the operator meant; None when
    libvirt read it as written."""
    if _ALIAS.fullmatch(uri):
        return ('%s has no scheme: libvirt took it for an alias of '
                'uri_aliases in libvirt.conf; %s' % (uri, ACCEPTED))
    parts = _split_test(uri)
    if parts is not None and parts.netloc:
        return ('%s names the remote host %s; a host file on this machine '
                'is given with three slashes, as test:///ABSOLUTE/PATH/'
                'host.xml' % (uri, parts.netloc))
    return None
