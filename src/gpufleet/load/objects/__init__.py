"""Kubernetes objects as the user writes them.

Documents, pods, nodes and node pools, queues, devices, storage, and the checks on them.
"""
