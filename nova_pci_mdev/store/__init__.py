"""Persistence of a compute host's tracker state.

``sqlite`` is the store (one SQLite transaction per operation), ``rows``
what a transaction reads and writes, ``schema`` the tables and identity
rows, ``files`` the store's files recognised before anything is written,
``state_dir`` the CLI's state directory that holds them.
"""
