"""The numpy array types of the vectorised state, and the unit its GPU arrays count in.

A leaf of the model: the cluster state, pods, selectors and every layer above name their
arrays with these aliases, and GPU amounts in milli-GPU, without importing one another for it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

MILLI = 1000
"""Milli-GPU in one whole GPU."""
