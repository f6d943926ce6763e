"""gpufleet: a GPU scheduler for Kubernetes AI clusters, one core behind three edges."""

__version__ = "0.1.0"
