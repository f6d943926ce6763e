"""Edges that read the world into the model: trace CSVs (and later, Kubernetes snapshots)."""
