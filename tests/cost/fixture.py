"""The hand-computed cost fixture: two nodes of different prices (one priced only as a whole
node), a whole-GPU job, a GPU share, a MIG slice, and a pod whose usage exceeds its request,
over a window of two hours. Every expected figure below is worked out by hand in the
comments, not by the code under test."""

from __future__ import annotations

from gpufleet.cost.allocation import Nodes, Runs
from gpufleet.cost.prices import PriceSheet, UnitPrices

HOUR = 3600.0
WINDOW = (0.0, 2 * HOUR)

SHEET_YAML = """\
apiVersion: gpufleet.io/v1alpha1
kind: PriceSheet
metadata: {name: fixture}
spec:
  title: fixture prices
  currency: USD
  base: {gpuHour: 1.5, vcpuHour: 0.0625, ramGiBHour: 0.0078125}
  nodeTypes:
  - name: h100
    gpuProduct: NVIDIA-H100-80GB-HBM3
    category: on-demand
    prices: {gpuHour: 3.0, vcpuHour: 0.05, ramGiBHour: 0.01}
  - name: a100-node
    instanceType: a100-box
    category: spot
    nodeHour: 12.0
"""
# a100-box: 4 GPUs, 32 vCPUs, 256 GiB. At the base prices: 4x1.5 + 32x0.0625 + 256x0.0078125
# = 6 + 2 + 2 = 10 $/h; the node costs 12 $/h, so every base price is scaled by 1.2:
# GPU 1.8, vCPU 0.075, GiB 0.009375 $/h.
SPLIT = UnitPrices(gpu=1.8, cpu=0.075, ram=0.009375)

A_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
B_LABELS = {"node.kubernetes.io/instance-type": "a100-box", "nvidia.com/gpu.product": "A100"}


def nodes(sheet: PriceSheet) -> Nodes:
    a = sheet.type_of(A_LABELS)
    b = sheet.type_of(B_LABELS)
    assert a is not None
    assert b is not None
    pa = a.prices(8, 64, 512, sheet.base)
    pb = b.prices(4, 32, 256, sheet.base)
    return Nodes.of(
        ("a", "b"),
        types=(a.name, b.name),
        categories=(a.category, b.category),
        capacity=[(8, 64, 512), (4, 32, 256)],
        prices=[(pa.gpu, pa.cpu, pa.ram), (pb.gpu, pb.cpu, pb.ram)],
    )


NAN = float("nan")
RUNS = Runs.of(
    ("ml/train", "ml/share", "infer/mig", "infer/hungry"),
    node=(0, 0, 1, 1),
    start=(0.0, HOUR, 0.0, 0.0),
    end=(2 * HOUR, 3 * HOUR, 2 * HOUR, 2 * HOUR),  # share: 1 h of its 2 inside the window
    request=[(2, 8, 64), (0.5, 2, 8), (0.25, 4, 16), (0, 2, 4)],
    usage=[(NAN, NAN, NAN), (NAN, NAN, NAN), (NAN, NAN, NAN), (NAN, 6, 3)],
    dims={
        "namespace": ("ml", "ml", "infer", "infer"),
        "queue": ("research", "research", "serving", "serving"),
        "experiment": ("exp-1", "exp-2", "exp-2", "exp-2"),
    },
)

# Per run (GPU, CPU, RAM cost in $):
#   train  on a, 2 h: 2 GPUs x 2 h x 3.0 = 12;  8 x 2 x 0.05 = 0.8;   64 x 2 x 0.01 = 1.28
#   share  on a, 1 h: 0.5 x 1 x 3.0 = 1.5;      2 x 1 x 0.05 = 0.1;    8 x 1 x 0.01 = 0.08
#   mig    on b, 2 h: 0.25 x 2 x 1.8 = 0.9;     4 x 2 x 0.075 = 0.6;   16 x 2 x 0.009375 = 0.3
#   hungry on b, 2 h: 0;  max(6, 2) = 6 x 2 x 0.075 = 0.9;  max(3, 4) = 4 x 2 x 0.009375 = 0.075
RUN_COSTS = [(12.0, 0.8, 1.28), (1.5, 0.1, 0.08), (0.9, 0.6, 0.3), (0.0, 0.9, 0.075)]
# Nodes over 2 h:
#   a: 8 x 2 x 3 = 48;  64 x 2 x 0.05 = 6.4;  512 x 2 x 0.01 = 10.24   (64.64)
#   b: 4 x 2 x 1.8 = 14.4;  32 x 2 x 0.075 = 4.8;  256 x 2 x 0.009375 = 4.8   (24, its price)
ASSETS = [(48.0, 6.4, 10.24), (14.4, 4.8, 4.8)]
# Idle = asset - workload:
#   a: 48 - 13.5 = 34.5;  6.4 - 0.9 = 5.5;  10.24 - 1.36 = 8.88
#   b: 14.4 - 0.9 = 13.5;  4.8 - 1.5 = 3.3;  4.8 - 0.375 = 4.425
IDLE = [(34.5, 5.5, 8.88), (13.5, 3.3, 4.425)]
IDLE_TOTAL = (48.0, 8.8, 13.305)
TOTAL = 88.64
