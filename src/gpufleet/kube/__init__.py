"""The live adapter: the only package that talks to a Kubernetes API server.

It lists and watches the objects gpufleet reads, translates each into the cluster cache's
events (``objects.py``), and writes back what the scheduling core decides.
"""
