"""Every file the tool reads: one reader, bounded, regular files only.

Configuration (``--config-file``), the host file of a ``test:///path``
connection and its sidecar, ``live-move-check --source`` and
``--domain-xml``, the emulated NVIDIA driver's catalogue and sysfs copy,
the emulated host's ``mdevs.json`` and ``host-facts.json``, sysfs
attributes: each is read here, and only when it is a regular file of a
bounded size. A FIFO would block the command forever, a character device
such as ``/dev/zero`` would be read until memory runs out, a directory
fails deep inside a parser, JSON nested a hundred thousand deep overflows
the interpreter's stack: each is refused up front with the path, what it
is and the rule, and the caller turns that into its own error (exit 2 for
what the operator names on the command line, 3 for what the host or the
state directory holds; never a traceback).

Invariants:

* :func:`problem`, :func:`read_bytes` and everything built on it never
  block and never read more than ``max_bytes + 1`` bytes: the path is
  checked with ``stat`` before it is opened (a device is never opened),
  opened non-blocking and checked again with ``fstat`` on the descriptor
  that is read, so a path swapped for a FIFO in between is refused too;
* ``follow=False`` (files of the state directory and of a tree) refuses a
  symbolic link in the last component instead of following it;
* :func:`load_json` returns only documents at most ``max_depth`` arrays
  and objects deep (:class:`TooDeep` otherwise, also when the decoder
  itself runs out of stack);
* :func:`copy_tree` copies directories and regular files only, found
  through directory descriptors (no path of the copy leaves the source
  tree), within a number of entries, a depth and a total size.

Errors: :class:`NotAnInputFile` (an ``OSError``) for what is refused,
the ``OSError`` of ``open(2)`` (``FileNotFoundError``...) as raised, and
``ValueError`` for the content (``UnicodeDecodeError``, JSON syntax,
:class:`TooDeep`).
"""

import errno
import json
import os
import stat

#: The largest input file read. A host description of 10,000 node devices
#: is about 6 MB; a nova.conf is a few KB.
MAX_BYTES = 64 * 1024 * 1024
#: The deepest JSON document read (arrays and objects): ours nest at most
#: five deep (the NVIDIA catalogue), Python's decoder fails near 1,000.
MAX_DEPTH = 32
#: What a copied tree may hold (the emulated NVIDIA sysfs tree of a GPU
#: with 64 VFs has about 200 entries, 5 levels below its root).
MAX_TREE_ENTRIES = 100000
MAX_TREE_DEPTH = 16

_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
          (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'),
          (stat.S_ISLNK, 'a symbolic link'))


class NotAnInputFile(OSError):
    """The path exists but is not a regular file of a readable size."""


class TooDeep(ValueError):
    """A JSON document nests deeper than the reader allows."""


def kind(mode):
    """``'a FIFO'``, ``'a directory'``... of an ``st_mode``."""
    return next((name for test, name in _KINDS if test(mode)),
                'not a regular file')


def _refusal(st, max_bytes=MAX_BYTES):
    if stat.S_ISREG(st.st_mode):
        if st.st_size > max_bytes:
            return ('is %d bytes, more than the %d read from an input file'
                    % (st.st_size, max_bytes))
        return None
    return 'is %s, expected a regular file' % kind(st.st_mode)


def problem(path, max_bytes=MAX_BYTES, follow=True):
    """Why ``path`` cannot be read as an input file, or None when it can
    be read or does not exist (callers report a missing file their own
    way)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return 'cannot be read: %s' % (exc.strerror or exc)
    return _refusal(st, max_bytes)


def read_bytes(path, max_bytes=MAX_BYTES, follow=True, dir_fd=None):
    """The bytes of the regular file ``path`` (relative to ``dir_fd`` when
    given), at most ``max_bytes`` of them (see the module docstring).

    Raises :class:`NotAnInputFile` for anything but a regular file of at
    most ``max_bytes`` (with ``follow=False``, also for a symbolic link),
    the usual ``OSError`` for a file that cannot be opened.
    """
    st = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    reason = _refusal(st, max_bytes)
    if reason is not None:
        raise NotAnInputFile(reason)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise NotAnInputFile('is a symbolic link, expected a regular '
                                 'file') from None
        raise
    try:
        reason = _refusal(os.fstat(fd), max_bytes)
        if reason is not None:
            raise NotAnInputFile(reason)
        data = _read_all(fd, max_bytes)
    finally:
        os.close(fd)
    if len(data) > max_bytes:               # it grew after the fstat
        raise NotAnInputFile('is more than the %d bytes read from an input '
                             'file' % max_bytes)
    return data


def read_text(path, encoding='utf-8', max_bytes=MAX_BYTES, follow=True,
              errors='strict'):
    """The text of the regular file ``path`` (:func:`read_bytes`);
    ``UnicodeDecodeError`` for bad bytes (unless ``errors`` says
    otherwise)."""
    return read_bytes(path, max_bytes, follow).decode(encoding, errors)


def load_json(path, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, follow=True):
    """The JSON document of the regular file ``path`` (UTF-8), at most
    ``max_depth`` deep; ``ValueError`` for bad bytes or syntax,
    :class:`TooDeep` for a document nested deeper."""
    return parse_json(read_text(path, max_bytes=max_bytes, follow=follow),
                      max_depth)


def parse_json(text, max_depth=MAX_DEPTH):
    """``json.loads(text)``, refusing a document more than ``max_depth``
    arrays and objects deep with :class:`TooDeep` (never RecursionError)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep('nests deeper than the %d levels of arrays and '
                      'objects read from an input file' % max_depth) from None
    # A document cannot be deeper than it has brackets: most are too small
    # to need the walk.
    if text.count('[') + text.count('{') > max_depth:
        depth = _depth(value, max_depth)
        if depth > max_depth:
            raise TooDeep('nests %s levels of arrays and objects, more than '
                          'the %d read from an input file'
                          % ('more than %d' % max_depth
                             if depth == max_depth + 1 else depth,
                             max_depth))
    return value


def _depth(value, limit):
    """The nesting depth of ``value`` (arrays and objects), level by level
    without recursion; stops at ``limit + 1``."""
    level = 0
    current = [value] if type(value) in (dict, list) else []
    while current:
        level += 1
        if level > limit:
            return limit + 1
        current = [child for item in current
                   for child in (item.values() if type(item) is dict
                                 else item)
                   if type(child) is dict or type(child) is list]
    return level


def _read_all(fd, max_bytes):
    """At most max_bytes + 1 bytes of fd, however the kernel splits
    reads."""
    chunks, size = [], 0
    while size <= max_bytes:
        try:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
        except BlockingIOError:
            break           # a regular file never says this; be safe
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b''.join(chunks)


class TreeRefused(OSError):
    """A tree to copy holds something other than directories and regular
    files, or is too large; ``filename`` names the offending path."""


def copy_tree(source, destination, max_bytes=MAX_BYTES,
              max_entries=MAX_TREE_ENTRIES, max_depth=MAX_TREE_DEPTH):
    """Copy the directories and regular files of the tree ``source`` to
    the new directory ``destination`` (its parent must exist).

    Refuses, with :class:`TreeRefused` naming the path and the rule, a
    symbolic link (wherever it leads), a FIFO, a device or a socket
    anywhere in the tree, more than ``max_entries`` entries, a directory
    more than ``max_depth`` levels below ``source``, or more than
    ``max_bytes`` of file content in all. Every entry is opened through
    its directory's descriptor without following links, so nothing
    outside ``source`` is read, whatever changes during the copy. On
    failure the partial copy is left for the caller to remove.
    """
    try:
        root = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise TreeRefused(exc.errno, 'cannot open the tree: %s'
                          % (exc.strerror or exc), source) from None
    budget = {'entries': 0, 'bytes': 0}
    pending = [(root, source, destination, 0)]
    os.mkdir(destination, 0o700)
    try:
        while pending:
            dir_fd, src, dst, level = pending.pop()
            try:
                _copy_dir(dir_fd, src, dst, level, pending, budget,
                          max_bytes, max_entries, max_depth)
            finally:
                os.close(dir_fd)
    finally:
        for dir_fd, _src, _dst, _level in pending:
            os.close(dir_fd)


def _refuse(path, rule):
    return TreeRefused(errno.EPERM, rule, path)


def _copy_dir(dir_fd, src, dst, level, pending, budget, max_bytes,
              max_entries, max_depth):
    """Copy the entries of one directory; subdirectories go to
    ``pending`` (opened, so that they are the ones checked here)."""
    with os.scandir(dir_fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        budget['entries'] += 1
        path = os.path.join(src, name)
        if budget['entries'] > max_entries:
            raise _refuse(path, 'the tree has more than %d entries'
                          % max_entries)
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if level + 1 > max_depth:
                raise _refuse(path, 'is more than %d directories below the '
                                    'top of the tree' % max_depth)
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY
                                | os.O_NOFOLLOW | os.O_CLOEXEC,
                                dir_fd=dir_fd)
            except OSError as exc:
                raise _refuse(path, 'is no longer a directory: %s'
                              % (exc.strerror or exc)) from None
            os.mkdir(os.path.join(dst, name), 0o700)
            pending.append((child, path, os.path.join(dst, name),
                            level + 1))
            continue
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, 'is %s; the tree may hold only directories '
                                'and regular files' % kind(st.st_mode))
        left = max_bytes - budget['bytes']
        if st.st_size > left:
            raise _refuse(path, 'brings the files of the tree to more than '
                                '%d bytes' % max_bytes)
        try:
            data = read_bytes(name, left, follow=False, dir_fd=dir_fd)
        except NotAnInputFile as exc:
            raise _refuse(path, '%s (it changed while being copied)'
                          % exc) from None
        budget['bytes'] += len(data)
        fd = os.open(os.path.join(dst, name), os.O_WRONLY | os.O_CREAT
                     | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
