"""One compute host's devices, operation by operation.

``host`` is :class:`~.host.ComputeHost` (one store transaction per
operation: load, discover, sync, act, save); ``claims``, ``flavor``,
``live_move`` and ``synced`` are the pieces it is made of; ``wiring``
assembles one from a libvirt URI, a state directory and the settings
(:func:`nova_pci_mdev.open_compute_host`).
"""
