"""Give the C heap's free pages back to the system (glibc's malloc_trim).

libvirt's test driver parses a ``test:///`` host file into an XML tree
and frees it at once, but glibc keeps the freed pages in the process: for
a host of 10,000 node devices about 60 MB that nothing uses again, since
Python allocates its small objects elsewhere. :func:`release_freed` hands
them back. It frees nothing that is in use, and is a no-op where the C
library has no ``malloc_trim`` (musl, macOS) or ctypes is missing.

The symbol is looked up in the process itself (``CDLL(None)``: the C
library every Python links): ``ctypes.util.find_library`` would import
``tempfile`` and ``subprocess`` and run ``ldconfig``, about 80 ms of a
command's start-up.
"""


def release_freed():
    """``malloc_trim(0)`` if the C library has it; True if it ran."""
    try:
        import ctypes
        trim = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True
