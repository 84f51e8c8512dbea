"""The host side (see :mod:`nova_pci_mdev.virt.libvirt`)."""
