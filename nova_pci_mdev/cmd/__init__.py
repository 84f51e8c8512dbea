"""The ``nova-pci-mdev`` command line: the only room that sees argparse.

``cli`` parses and dispatches, ``live`` and ``restore`` add their commands,
``common`` what every command shares (the compute host of its options comes
from the public API, :func:`nova_pci_mdev.open_compute_host`), ``render``
the tables and JSON.
"""
