"""Reading the cluster: watches and the translation of objects into the scheduler's vocabulary."""
