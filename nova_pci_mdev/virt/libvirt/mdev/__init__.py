"""mdev lifecycle: the backend interface and its manager (``lifecycle``),
through libvirt node devices (``libvirt_backend``) or sysfs
(``sysfs_backend``)."""
