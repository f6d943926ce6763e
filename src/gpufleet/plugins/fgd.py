"""FGD: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23).

Place the pod where it grows the cluster's GPU fragmentation the least. With ``F`` the
node fragment against the workload's typical pods (:mod:`gpufleet.model.fragmentation`):

    score(node) = trunc(100 * sigmoid((F_before(node) - F_after(node)) / 1000))

For a pod asking for a share of a GPU every GPU that can hold it is tried; the node scores
with its best GPU, and inside the chosen node the pod takes the first GPU (in index order)
with the best truncated score. Whole-GPU pods take fully free GPUs in index order. CPU-only
pods are scored too, by the fragment their CPU use causes (a node whose CPU runs out strands
its GPUs).

The per-node terms are cached in the shared :class:`FragmentIndex` and refreshed only for
nodes that changed, so one score is ``O(candidates x typical pods)`` numpy work.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import FragmentIndex, signature_key
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.gpu_pick import first_free_gpus

NAME = "FGDScore"
GPU_CHOICE = "FGDGpu"


@dataclass(frozen=True, slots=True)
class Args:
    scale_milli: float = 1000.0
    """Fragment reduction (milli-GPU) that moves the sigmoid by one unit."""


def fgd_score(delta: FloatArray, args: Args) -> FloatArray:
    """``trunc(100 * sigmoid(delta / scale))`` for fragment reductions ``delta``."""
    return np.trunc((1.0 / (1.0 + np.exp(-(delta / args.scale_milli)))) * 100.0)


def share_options(gpu_free: IntArray, gpu_milli: int) -> tuple[IntArray, IntArray]:
    """Distinct (row, free milli) options for a share of ``gpu_milli`` on rows of ``gpu_free``.

    GPUs with equal free milli on one node give the same fragment, so each is tried once.
    Returns row indexes (sorted, every row present when it fits) and the GPU's free milli.
    """
    ordered = -np.sort(-gpu_free, axis=1)
    distinct = np.ones_like(ordered, dtype=np.bool_)
    distinct[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    rows, cols = np.nonzero(distinct & (ordered >= gpu_milli))
    return rows, ordered[rows, cols]


class FGD:
    """Both the score and the GPU choice of FGD, over one shared fragment index."""

    node_local = True
    """A node's score depends on the pod and the node's own row, against fixed typical pods
    (``Framework.run_scores``)."""

    def __init__(self, name: str, args: Args, fragments: FragmentIndex) -> None:
        self.name = name
        self.args = args
        self.fragments = fragments

    def node_key(self, state: ClusterState, node: int) -> Hashable:
        """What the score reads of ``node``: its model, free CPU and free milli-GPU per GPU
        in any order (the fragment index's signature)."""
        return signature_key(state, node)

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        self.fragments.sync(state)
        if not pod.is_gpu_share:
            delta = self.fragments.fragment_delta(state, nodes, pod, nodes)
            return fgd_score(delta, self.args)
        rows, free = share_options(state.gpu_free[nodes], pod.gpu_milli)
        delta = self.fragments.fragment_delta(state, nodes[rows], pod, free)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        return fgd_score(np.maximum.reduceat(delta, starts), self.args)

    def choose_gpus(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if not pod.is_gpu_share:
            return first_free_gpus(state, pod, node)
        self.fragments.sync(state)
        free = state.node_gpu_free(node)
        gpus = np.flatnonzero(free >= pod.gpu_milli)
        options = np.full(gpus.size, node, dtype=np.int64)
        scores = fgd_score(
            self.fragments.fragment_delta(state, options, pod, free[gpus]), self.args
        )
        return (int(gpus[np.argmax(scores)]),)


def _fragments(handle: Handle) -> FragmentIndex:
    if handle.fragments is None:
        raise ValueError("FGD needs the target workload (typical pods) in the handle")
    return handle.fragments


def new(args: Args, handle: Handle) -> FGD:
    return FGD(NAME, args, _fragments(handle))


def new_gpu_choice(args: Args, handle: Handle) -> FGD:
    return FGD(GPU_CHOICE, args, _fragments(handle))
