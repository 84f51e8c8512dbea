"""The host side: libvirt, node devices, mdev lifecycle, guest XML.

``seam.py`` is the only module that imports ``libvirt``; everything that
talks to libvirt is handed its :class:`~.seam.Libvirt`. The pure modules
(``records``, ``nodedev``, ``nodenames``, ``xmlsafe``, ``slots``,
``config``) do no I/O. The mdev backends live in ``mdev/``, NVIDIA's vGPU
VFs in ``nvidia/``, the emulated host of ``test://`` in ``emulated/``.
Nothing here imports ``pci``, ``conf``, ``compute``, ``store`` or ``cmd``
(see docs/ARCHITECTURE.md).
"""
