"""The cost layer: prices and records in, money out (ARCHITECTURE.md, ``cost/``).

* :mod:`~gpufleet.cost.prices` — a price sheet: what each node type costs per GPU-, vCPU- and
  GiB-hour, a node price split into components as OpenCost splits it;
* :mod:`~gpufleet.cost.allocation` — OpenCost's allocation over a window: per run of a pod
  the resource-hours it is charged (the larger of request and usage) at its node's prices,
  the capacity no pod was charged for (``__idle__``), and aggregation by any dimension.

Pure: no files, no clock; times are seconds on the caller's clock.
"""
