"""Files the operator names: configuration, host descriptions, move data.

Every file given on the command line (``--config-file``, the host file of
a ``test:///path`` connection and its sidecar, ``live-move-check
--source`` and ``--domain-xml``) is read only when it is a regular file of
at most :data:`MAX_BYTES`. A FIFO would block the command forever, a
character device such as ``/dev/zero`` would be read until memory runs
out, a directory fails deep inside a parser: each is refused up front
with the path and what it is, and the caller turns that into its own
error (exit 2 or 3, never a traceback).

Invariants: :func:`problem` and :func:`read_text` never block (the open
is non-blocking and checked with ``fstat`` on the descriptor that is
read, so a path swapped for a FIFO after the check is refused too) and
never read more than ``MAX_BYTES + 1`` bytes.
"""

import os
import stat

#: The largest input file read. A host description of 10,000 node devices
#: is about 6 MB; a nova.conf is a few KB.
MAX_BYTES = 64 * 1024 * 1024

_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
          (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'))


class NotAnInputFile(OSError):
    """The path exists but is not a regular file of a readable size."""


def _refusal(st):
    if stat.S_ISREG(st.st_mode):
        if st.st_size > MAX_BYTES:
            return ('is %d bytes, more than the %d read from an input file'
                    % (st.st_size, MAX_BYTES))
        return None
    kind = next((name for test, name in _KINDS if test(st.st_mode)),
                'not a regular file')
    return 'is %s, expected a regular file' % kind


def problem(path):
    """Why ``path`` cannot be read as an input file, or None when it can
    be read or does not exist (callers report a missing file their own
    way)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return 'cannot be read: %s' % (exc.strerror or exc)
    return _refusal(st)


def read_text(path, encoding='utf-8'):
    """The text of the regular file ``path``.

    Raises :class:`NotAnInputFile` (an ``OSError``) for anything but a
    regular file of at most :data:`MAX_BYTES`, the usual ``OSError`` for a
    file that cannot be opened, ``UnicodeDecodeError`` for bad bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        reason = _refusal(os.fstat(fd))
        if reason is not None:
            raise NotAnInputFile(reason)
        data = _read_all(fd)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:               # it grew after the fstat
        raise NotAnInputFile('is more than the %d bytes read from an input '
                             'file' % MAX_BYTES)
    return data.decode(encoding)


def _read_all(fd):
    """At most MAX_BYTES + 1 bytes of fd, however the kernel splits reads."""
    chunks, size = [], 0
    while size <= MAX_BYTES:
        chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b''.join(chunks)
