"""Writing to the cluster: bindings, claims, volumes, events and status."""
