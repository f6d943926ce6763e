"""A profile: which plugins run at each extension point, with which score weights.

A placement policy (``fgd``, ``best-fit``, ``kube-default``, ...) is nothing but a profile
over registered plugins, as a kube-scheduler profile is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    """One scheduling profile.

    Attributes:
        name: the policy name users pass (``--policy``).
        filters: filter plugin names, run in order; a node must pass all.
        scores: ``(score plugin name, weight)``; a node's score is the weighted sum.
        gpu_chooser: the plugin that picks GPUs inside the chosen node.
        whole_gpus_only: device-plugin semantics: GPUs are handed out whole, so a pod that
            asks for a share of a GPU takes a whole one (what stock Kubernetes does).
        description: one line for ``--help`` and reports.
    """

    name: str
    filters: tuple[str, ...]
    scores: tuple[tuple[str, int], ...]
    gpu_chooser: str
    whole_gpus_only: bool = False
    description: str = ""
