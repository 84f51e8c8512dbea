"""Versioned objects of nova-pci-mdev.

Call :func:`register_all` once before using ``objects.<Name>``; modules
that need one class may also import it from its module directly.
"""


def register_all():
    __import__('nova_pci_mdev.objects.pci_device')
    __import__('nova_pci_mdev.objects.pci_device_pool')
    __import__('nova_pci_mdev.objects.instance_pci_request')
