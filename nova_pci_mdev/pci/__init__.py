"""Pure scheduling: device specs, aliases, pools, NUMA policies, the tracker,
the Placement provider tree.

No I/O and no configuration lookups: device records, settings and requests
are passed in. Imports only ``objects``, ``names``, ``numa`` and
``exception`` (see docs/ARCHITECTURE.md; tests/unit/test_layout.py checks).
"""
