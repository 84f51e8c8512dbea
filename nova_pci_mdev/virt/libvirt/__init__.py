"""The host side: libvirt, node devices, mdev lifecycle, guest XML.

``seam.py`` is the only module that imports ``libvirt``; everything that
talks to libvirt is handed its :class:`~.seam.Libvirt`. The pure modules
(``records``, ``nodedev``, ``nodenames``, ``xmlsafe``, ``slots``,
``config``) do no I/O. Nothing here imports ``pci``, ``conf``,
``compute``, ``store`` or ``cli`` (see docs/ARCHITECTURE.md).
"""
