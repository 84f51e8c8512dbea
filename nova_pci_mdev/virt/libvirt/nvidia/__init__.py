"""NVIDIA vGPUs on SR-IOV VFs: the model (``vf``), the ``nvidia/`` sysfs
directory (``sysfs``), the vGPU type policy (``vgpu_vfs``) and what
``check-config`` says about them (``check``)."""
