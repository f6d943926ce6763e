"""The recording the Prometheus tests query: a small cluster as kube-state-metrics,
dcgm-exporter and cAdvisor showed it to Prometheus for two hours, scraped once a minute at
half past (2025-03-03 10:00:30Z to 11:59:30Z), as OpenMetrics text (:func:`openmetrics`).

Two GPU nodes of different products: ``gpu-a`` (8 H100, 64 cores, 512 GiB; its exporter
reports engine activity) and ``gpu-b`` (4 L4, 32 cores, 128 GiB, an instance type priced as a
whole node; its exporter reports GPU utilisation only, in percent). The pods:

========================  =====  =========  =====================  =============================
pod                       node   minutes    requests               GPU activity, labels
========================  =====  =========  =====================  =============================
ml/train-0                gpu-a  0-120      4 GPU, 16 cores, 128Gi 0.6 on 4 GPUs; uses 20 cores,
                                                                   100 GiB; research, exp-a
ml/notebook               gpu-a  0-90 (*)   1 GPU, 4 cores, 32 Gi  busy 20, idle 45, busy 1,
                                                                   idle 20, busy 4 (idle: 0.005);
                                                                   research, PodGroup nb-group
ml/eval-1                 gpu-b  0-120      1 GPU, 4 cores, 16 Gi  idle 40, 10 missing, idle 25,
                                                                   80% for 45; research, exp-a
infer/share-0             gpu-b  0-120      0.5 GPU (share), 2     none (a share is not
                                            cores, 8 Gi            attributed by the exporter);
                                                                   serving, exp-b
infer/web                 gpu-b  30-90      2 containers: 4 cores, no GPU; uses 6 cores, 10 GiB;
                                            16 Gi                  serving, no experiment
ml/pending-0              -      0-120      8 GPU                  never bound: costs nothing
========================  =====  =========  =====================  =============================

(*) the notebook succeeds at minute 90; its pod object stays until minute 105.

gpufleet's ``gpufleet_queue_allocated`` for serving queue ``inference`` (GPUs): 8 in minutes
0-30, 16 in 30-60, 8 after.

The text (7,757 samples, about 1 MB) is written when the tests start rather than kept in
the repository: this description is what a reader checks the expected figures against.
``python -m tests.cost.recording FILE`` writes it to a file, e.g. to load into another
Prometheus with ``promtool tsdb create-blocks-from openmetrics FILE DIR``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

START = 1_740_996_000  # 2025-03-03T10:00:00Z
MINUTES = 120
GIB = 2**30

Spans = Sequence[tuple[int, int, float]]
"""``(from minute, to minute, value)``: the value scraped in each minute of ``[from, to)``."""


def always(value: float, start: int = 0, end: int = MINUTES) -> Spans:
    return [(start, end, value)]


def counter(rate: float, start: int = 0, end: int = MINUTES) -> Spans:
    """A counter growing at ``rate`` per second (sampled at half past each minute)."""
    return [(m, m + 1, 1000.0 + rate * 60 * (m + 0.5)) for m in range(start, end)]


Family = tuple[str, str, Sequence[tuple[Mapping[str, str], Spans]]]
"""A metric family: name, OpenMetrics type, and its series."""

TRAIN = ("ml", "train-0", "gpu-a")
NOTEBOOK = ("ml", "notebook", "gpu-a")
EVAL = ("ml", "eval-1", "gpu-b")
SHARE = ("infer", "share-0", "gpu-b")
WEB = ("infer", "web", "gpu-b")
PENDING = ("ml", "pending-0", "")
"""Each pod's namespace, name and node."""


def kube_state_metrics() -> list[Family]:
    pods = {
        TRAIN: (0, 120),
        NOTEBOOK: (0, 105),  # the pod object outlives its run (Succeeded at 90)
        EVAL: (0, 120),
        SHARE: (0, 120),
        WEB: (30, 90),
        PENDING: (0, 120),
    }
    info = [
        ({"namespace": ns, "pod": pod, "uid": f"uid-{pod}", "node": node}, always(1, *span))
        for (ns, pod, node), span in pods.items()
    ]
    phase = [
        (_pod(ns, pod, phase="Running"), always(1, *span))
        for (ns, pod, node), span in pods.items()
        if node and pod != "notebook"
    ]
    phase += [
        (_pod("ml", "notebook", phase="Running"), [(0, 90, 1), (90, 105, 0)]),
        (_pod("ml", "notebook", phase="Succeeded"), [(0, 90, 0), (90, 105, 1)]),
        (_pod("ml", "pending-0", phase="Pending"), always(1)),
    ]
    requests = [
        (_request(TRAIN, "trainer", "nvidia_com_gpu", "integer"), always(4)),
        (_request(TRAIN, "trainer", "cpu", "core"), always(16)),
        (_request(TRAIN, "trainer", "memory", "byte"), always(128 * GIB)),
        (
            _request(NOTEBOOK, "jupyter", "nvidia_com_gpu", "integer"),
            [(0, 105, 1)],
        ),
        (_request(NOTEBOOK, "jupyter", "cpu", "core"), [(0, 105, 4)]),
        (_request(NOTEBOOK, "jupyter", "memory", "byte"), [(0, 105, 32 * GIB)]),
        (_request(EVAL, "eval", "nvidia_com_gpu", "integer"), always(1)),
        (_request(EVAL, "eval", "cpu", "core"), always(4)),
        (_request(EVAL, "eval", "memory", "byte"), always(16 * GIB)),
        (_request(SHARE, "server", "cpu", "core"), always(2)),
        (_request(SHARE, "server", "memory", "byte"), always(8 * GIB)),
        (_request(WEB, "nginx", "cpu", "core"), always(1, 30, 90)),
        (_request(WEB, "nginx", "memory", "byte"), always(4 * GIB, 30, 90)),
        (_request(WEB, "app", "cpu", "core"), always(3, 30, 90)),
        (_request(WEB, "app", "memory", "byte"), always(12 * GIB, 30, 90)),
        (_request(PENDING, "job", "nvidia_com_gpu", "integer"), always(8)),
    ]
    queue, experiment, group = (
        "label_gpufleet_io_queue",
        "label_gpufleet_io_experiment",
        "label_scheduling_x_k8s_io_pod_group",
    )
    project = "label_example_com_project"
    labels = [
        (
            _pod("ml", "train-0", **{queue: "research", experiment: "exp-a", project: "llm"}),
            always(1),
        ),
        (_pod("ml", "notebook", **{queue: "research", group: "nb-group"}), always(1, 0, 105)),
        (
            _pod("ml", "eval-1", **{queue: "research", experiment: "exp-a", project: "vision"}),
            always(1),
        ),
        (_pod("infer", "share-0", **{queue: "serving", experiment: "exp-b"}), always(1)),
        (_pod("infer", "web", **{queue: "serving"}), always(1, 30, 90)),
        (_pod("ml", "pending-0", **{queue: "research"}), always(1)),
    ]
    annotations = [
        (_pod("infer", "share-0", annotation_gpufleet_io_gpu_fraction="0.5"), always(1)),
    ]
    capacity = [
        (_node("gpu-a", resource=r, unit=u), always(v))
        for r, u, v in (
            ("cpu", "core", 64),
            ("memory", "byte", 512 * GIB),
            ("nvidia_com_gpu", "integer", 8),
            ("pods", "integer", 110),
        )
    ] + [
        (_node("gpu-b", resource=r, unit=u), always(v))
        for r, u, v in (
            ("cpu", "core", 32),
            ("memory", "byte", 128 * GIB),
            ("nvidia_com_gpu", "integer", 4),
            ("pods", "integer", 110),
        )
    ]
    node_labels = [
        (
            _node(
                "gpu-a",
                label_nvidia_com_gpu_product="NVIDIA-H100-80GB-HBM3",
                label_node_kubernetes_io_instance_type="a3-highgpu-8g",
            ),
            always(1),
        ),
        (
            _node(
                "gpu-b",
                label_nvidia_com_gpu_product="NVIDIA-L4",
                label_node_kubernetes_io_instance_type="g6.12xlarge",
            ),
            always(1),
        ),
    ]
    return [
        ("kube_pod_info", "gauge", info),
        ("kube_pod_status_phase", "gauge", phase),
        ("kube_pod_container_resource_requests", "gauge", requests),
        ("kube_pod_labels", "gauge", labels),
        ("kube_pod_annotations", "gauge", annotations),
        ("kube_node_status_capacity", "gauge", capacity),
        ("kube_node_labels", "gauge", node_labels),
    ]


def dcgm_exporter() -> list[Family]:
    h100 = {"modelName": "NVIDIA H100 80GB HBM3", "Hostname": "gpu-a"}
    l4 = {"modelName": "NVIDIA L4", "hostname": "gpu-b"}
    active = [(_gpu(h100, i, "ml", "train-0", "trainer"), always(0.6)) for i in range(4)]
    active += [
        (
            _gpu(h100, 4, "ml", "notebook", "jupyter"),
            [(0, 20, 0.3), (20, 65, 0.005), (65, 66, 0.3), (66, 86, 0.005), (86, 90, 0.3)],
        ),
        (_gpu(h100, 4, "", "", ""), always(0.0, 90, 120)),
    ]
    active += [(_gpu(h100, i, "", "", ""), always(0.0)) for i in (5, 6, 7)]
    util = [
        (_gpu(l4, 0, "ml", "eval-1", "eval"), [(0, 40, 0), (50, 75, 0), (75, 120, 80)]),
        (_gpu(l4, 1, "", "", ""), always(20)),
    ]
    util += [(_gpu(l4, i, "", "", ""), always(0)) for i in (2, 3)]
    return [
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", active),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", util),
    ]


def cadvisor() -> list[Family]:
    cpu = [
        (_container("ml", "train-0", "trainer"), counter(20)),
        (_container("ml", "train-0", "POD"), counter(0.01)),  # the pause container: left out
        (_container("ml", "train-0", ""), counter(20.01)),  # the pod's cgroup: left out
        (_container("ml", "eval-1", "eval"), counter(2)),
        (_container("infer", "share-0", "server"), counter(1)),
        (_container("infer", "web", "nginx"), counter(0.5, 30, 90)),
        (_container("infer", "web", "app"), counter(5.5, 30, 90)),
    ]
    memory = [
        (_container("ml", "train-0", "trainer"), always(100 * GIB)),
        (_container("ml", "train-0", ""), always(101 * GIB)),
        (_container("ml", "eval-1", "eval"), always(8 * GIB)),
        (_container("infer", "share-0", "server"), always(4 * GIB)),
        (_container("infer", "web", "nginx"), always(2 * GIB, 30, 90)),
        (_container("infer", "web", "app"), always(8 * GIB, 30, 90)),
    ]
    return [
        ("container_cpu_usage_seconds", "counter", cpu),
        ("container_memory_working_set_bytes", "gauge", memory),
    ]


def _pod(namespace: str, pod: str, **labels: str) -> dict[str, str]:
    return {"namespace": namespace, "pod": pod, "uid": f"uid-{pod}", **labels}


def _request(
    where: tuple[str, str, str], container: str, resource: str, unit: str
) -> dict[str, str]:
    namespace, pod, node = where
    return {
        **_pod(namespace, pod),
        "container": container,
        "node": node,
        "resource": resource,
        "unit": unit,
    }


def _node(node: str, **labels: str) -> dict[str, str]:
    return {"node": node, **labels}


def _gpu(
    host: Mapping[str, str], index: int, namespace: str, pod: str, container: str
) -> dict[str, str]:
    name = host.get("Hostname") or host.get("hostname")
    return {
        "gpu": str(index),
        "UUID": f"GPU-{name}-{index:04d}",
        "device": f"nvidia{index}",
        **host,
        "container": container,
        "namespace": namespace,
        "pod": pod,
    }


def _container(namespace: str, pod: str, container: str) -> dict[str, str]:
    return {"container": container, "namespace": namespace, "pod": pod}


def gpufleet() -> list[Family]:
    """gpufleet's own gauge of what a serving queue holds: the live scheduler's forecast
    reads it a day later (``kube/process/forecast.py``)."""
    held = [({"queue": "inference", "resource": "gpu"}, [(0, 30, 8), (30, 60, 16), (60, 120, 8)])]
    return [("gpufleet_queue_allocated", "gauge", held)]


def lines() -> Iterator[str]:
    families = [*kube_state_metrics(), *dcgm_exporter(), *cadvisor(), *gpufleet()]
    for name, kind, series in families:
        yield f"# TYPE {name} {kind}"
        sample = f"{name}_total" if kind == "counter" else name
        for labels, spans in series:
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            for first, last, value in spans:
                for minute in range(first, last):
                    yield f"{sample}{{{text}}} {_number(value)} {START + 60 * minute + 30}"
    yield "# EOF"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def openmetrics() -> str:
    return "\n".join(lines()) + "\n"


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(openmetrics(), encoding="utf-8")
