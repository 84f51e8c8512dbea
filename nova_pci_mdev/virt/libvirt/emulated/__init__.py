"""The one emulated host, for libvirt's ``test://`` driver: the host and
its sidecar (``host``, ``host_facts``), mdevs kept in the state directory
(``mdevs``) and an emulated NVIDIA vGPU driver (``nvidia``)."""
