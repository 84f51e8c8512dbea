"""The ``nova-pci-mdev`` command line: the only room that sees argparse.

``cli`` parses and dispatches, ``live`` and ``restore`` add their commands,
``common`` holds what every command shares, ``render`` the tables and JSON,
``wiring`` the compute host a command's options describe.
"""
