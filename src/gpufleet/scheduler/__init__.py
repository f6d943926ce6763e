"""The scheduling core, in rooms that follow the walk of a job (lowest first):

- ``api/``: the vocabulary — jobs, transactions, outcomes and reasons;
- ``state/``: what the cluster is — the cache kept by events, the ledger of what runs, the
  victim pool, ResourceClaims, fair shares, the workload FGD measures against;
- ``queues/``: who goes next — the backlog, fair-share order, admission, ``minResources``,
  the reservations of starving jobs;
- ``placement/``: where a job goes — the placer, one pod's placement, slot counts, topology
  domains;
- ``room/``: making room when it does not fit — the victim search and its actions;
- ``cycle/``: the cycle that runs them, the sessions opened on the cache, the commit step
  and the journal.

Each room imports only rooms below it (an import-linter contract in ``pyproject.toml``).
"""
