"""openb CSV loading: good files load whole; every bad input names file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.traces.openb import (
    BUNDLED_NODES,
    BUNDLED_WORKLOAD,
    bundled,
    load_nodes,
    load_pods,
)

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def test_bundled_data_loads_completely() -> None:
    workload = load_pods(bundled(BUNDLED_WORKLOAD))
    nodes = load_nodes(bundled(BUNDLED_NODES))
    assert workload.name == "openb_pod_list_default"
    assert len(workload.pods) == 8152
    assert len(nodes) == 1213
    assert sum(n.gpus for n in nodes) == 6212


def test_gpu_spec_becomes_allowed_models_and_extra_columns_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        POD_HEADER.replace("\n", ",qos\n")
        + "a,1000,10,1,500,V100M16|V100M32,LS\nb,2000,0,0,0,,BE\n"
    )
    a, b = load_pods(path).pods
    assert a.gpu_models == frozenset({"V100M16", "V100M32"})
    assert (b.num_gpu, b.gpu_models) == (0, None)


def test_the_five_column_form_of_the_multigpu_files_loads(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,10,8,1000\n")
    assert load_pods(path).pods[0].num_gpu == 8


POD_CASES = [
    ("name,cpu_milli,memory_mib,num_gpu\n", "pods.csv:1: missing column(s) gpu_milli"),
    (
        POD_HEADER + "a,1000,1,0,0,\nb,abc,1,0,0,\n",
        "pods.csv:3: field 'cpu_milli': expected a non-negative integer, got 'abc'",
    ),
    (
        POD_HEADER + "a,1000,-5,0,0,\n",
        "pods.csv:2: field 'memory_mib': expected a non-negative integer, got -5",
    ),
    (
        POD_HEADER + "a,1000,1,1,1500,\n",
        "pods.csv:2: field 'gpu_milli': expected 1..1000 milli-GPU per GPU, got 1500",
    ),
    (
        POD_HEADER + "a,1000,1,2,500,\n",
        "pods.csv:2: field 'gpu_milli': expected 1000 for a pod with 2 GPUs",
    ),
    (
        POD_HEADER + "a,1000,1,0,300,\n",
        "pods.csv:2: field 'gpu_milli': expected 0 for a pod without GPUs, got 300",
    ),
    (
        POD_HEADER + "a,1000,1,0,0,\na,1,1,0,0,\n",
        "pods.csv:3: field 'name': duplicate pod name 'a'",
    ),
    (POD_HEADER + ",1000,1,0,0,\n", "pods.csv:2: field 'name': expected a pod name"),
    (POD_HEADER + "a,1000\n", "pods.csv:2: field 'memory_mib': missing value (row too short)"),
    (POD_HEADER, "pods.csv: has no pods"),
]
NODE_CASES = [
    ("sn,cpu_milli,gpu,model\n", "nodes.csv:1: missing column(s) memory_mib"),
    (
        NODE_HEADER + "n1,1000,1024,two,T4\n",
        "nodes.csv:2: field 'gpu': expected a non-negative integer, got 'two'",
    ),
    (NODE_HEADER + "n1,1000,1024,2,\n", "nodes.csv:2: field 'model': expected the GPU model"),
    (
        NODE_HEADER + "n1,1000,1024,2,T4\nn1,1,1,0,\n",
        "nodes.csv:3: field 'sn': duplicate node name 'n1'",
    ),
    (
        NODE_HEADER + "n1,1000,1024,100000000,T4\n",
        "nodes.csv:2: field 'gpu': expected at most 128 GPUs on one node, got 100000000",
    ),
    (
        NODE_HEADER + "n1,1000000000000000000000000000000,1024,2,T4\n",
        "nodes.csv:2: field 'cpu_milli': 1000000000000000000000000000000 is too large",
    ),
]


@pytest.mark.parametrize(
    ("body", "message"),
    POD_CASES + NODE_CASES,
    ids=[
        "pods-wrong-columns",
        "pods-non-numeric",
        "pods-negative",
        "pods-share-too-big",
        "pods-multi-gpu-share",
        "pods-milli-without-gpu",
        "pods-duplicate",
        "pods-empty-name",
        "pods-short-row",
        "pods-no-rows",
        "nodes-wrong-columns",
        "nodes-non-numeric",
        "nodes-gpus-without-model",
        "nodes-duplicate",
        "nodes-absurd-gpus",
        "nodes-absurd-cpu",
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path: Path, body: str, message: str) -> None:
    filename = message.split(":", 1)[0]
    path = tmp_path / filename
    path.write_text(body)
    loader = load_pods if filename == "pods.csv" else load_nodes
    with pytest.raises(InputError) as caught:
        loader(path)
    assert str(caught.value).removeprefix(str(tmp_path) + "/").startswith(message)


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_pods(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="is a directory"):
        load_pods(tmp_path)
    binary = tmp_path / "pods.csv"
    binary.write_bytes(b"name,cpu_milli\n\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        load_pods(binary)
