"""A real Linux host for the CLI: the kernel's ``mtty`` in a QEMU VM.

Host side (standard library only, run as root by ``tools/realhost``):
:mod:`.steps` (commands and their failures), :mod:`.image` (the cached VM
image built from Debian packages), :mod:`.vm` (QEMU, phases, results) and
:mod:`.report` (check records, the summary line, ``docs/REALHOST.md``).
Guest side (run inside the VM by the image's systemd unit):
:mod:`.guest` and its scenario modules.
"""
