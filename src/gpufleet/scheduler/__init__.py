"""The cycle: from a pod (later, a gang) and a cluster state to a placement or a reason."""
