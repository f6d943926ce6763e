"""What the cluster is: the cache kept by events, the ledger of what runs, the victim pool,
ResourceClaims, fair shares, and the workload the policy measures fragmentation against."""
