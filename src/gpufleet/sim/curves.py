"""Per-pod logs -> curves over arrived workload, as the FGD authors' analysis scripts do.

After every pod the simulator logs the arrived and the allocated GPU milli. Arrived is
turned into an integer percent of cluster GPU capacity (round half to even), each value is
rounded to 2 decimals, and the curve at ``x`` is the mean of the values logged at ``x`` —
or, where no event rounds to ``x``, of those within ``x +- 1``; ``None`` if there are none.
NaN values (e.g. a fragment ratio with no idle GPU) are left out of the mean.
"""

from __future__ import annotations

import numpy as np

from gpufleet.model.arrays import FloatArray
from gpufleet.model.results import ARRIVED_MAX_PCT


def discretise(
    arrived_pct: FloatArray, values: FloatArray, max_pct: int = ARRIVED_MAX_PCT
) -> tuple[float | None, ...]:
    """The curve of ``values`` over integer arrived percent ``0..max_pct``."""
    bucket = np.round(arrived_pct)
    rounded = np.round(values, 2)
    valid = ~np.isnan(rounded)
    curve: list[float | None] = []
    for x in range(max_pct + 1):
        chosen = (bucket == x) & valid
        if not chosen.any():
            chosen = (np.abs(bucket - x) <= 1) & valid
        curve.append(round(float(rounded[chosen].mean()), 2) if chosen.any() else None)
    return tuple(curve)
