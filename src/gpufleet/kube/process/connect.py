"""How the live scheduler finds its API server, by kubectl's rules.

In order: the ``--kubeconfig`` file; the ``KUBECONFIG`` environment variable (its first
file); ``~/.kube/config``; then the pod's service account (in-cluster). lightkube reads the
files and the service account and builds the HTTP client (TLS, tokens, exec plugins).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

from gpufleet.kube.transport import AiohttpTransport, ApiClient
from gpufleet.load.errors import InputError

IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def load_config(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """The configuration kubectl would use (module docstring); an :class:`InputError`
    naming what was tried when there is none."""
    candidates: list[Path] = []
    if kubeconfig is not None:
        candidates.append(kubeconfig)
    elif os.environ.get("KUBECONFIG"):
        candidates.append(Path(os.environ["KUBECONFIG"].split(os.pathsep)[0]))
    else:
        candidates.append(Path.home() / ".kube" / "config")
    for path in candidates:
        if path.is_file():
            try:
                config: KubeConfig = KubeConfig.from_file(path)  # type: ignore[no-untyped-call]
                found = config.get(context)
            except Exception as exc:  # noqa: BLE001 (lightkube raises several kinds)
                raise InputError(str(path), f"not a usable kubeconfig: {exc}") from None
            if found is None:
                raise InputError(str(path), f"no context {context or '(current)'}")
            return config
        if kubeconfig is not None:
            raise InputError(str(path), "no such kubeconfig file")
    if (IN_CLUSTER / "token").is_file():
        account: KubeConfig = KubeConfig.from_service_account(str(IN_CLUSTER))  # type: ignore[no-untyped-call]
        return account
    tried = ", ".join(str(p) for p in candidates)
    raise InputError(
        "kubeconfig",
        f"no cluster configuration found (tried {tried} and the in-cluster service account)",
    )


def http_client(
    config: KubeConfig, context: str | None = None, *, connections: int | None = None
) -> httpx.AsyncClient:
    """An HTTP client for the API server of ``config``, over aiohttp's pool
    (``transport.py``): every request times out after 30 s (a watch overrides its read
    timeout: it waits for events); at most ``connections`` open at once (httpx's default,
    100, when not given), and as many for the writes made once per pod (``http1.py``)."""
    timeout = httpx.Timeout(30.0)
    single = config.get(context)
    if single is None:
        raise InputError("kubeconfig", f"no context {context or '(current)'}")
    parameters = client_adapter.httpx_parameters(single, timeout, None, True)  # type: ignore[arg-type]
    return ApiClient(AiohttpTransport(parameters["verify"], connections), **parameters)
