"""How the live scheduler finds its API server, by kubectl's rules.

In order: the ``--kubeconfig`` file; the ``KUBECONFIG`` environment variable (its first
file); ``~/.kube/config``; then the pod's service account (in-cluster). lightkube reads the
files and the service account and builds the HTTP client (TLS, tokens, exec plugins).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

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
    (``transport.py``) or the proxy the environment names for it (:func:`environment_proxy`):
    every request times out after 30 s (a watch overrides its read
    timeout: it waits for events); at most ``connections`` open at once (httpx's default,
    100, when not given), and as many for the writes made once per pod (``http1.py``)."""
    timeout = httpx.Timeout(30.0)
    single = config.get(context)
    if single is None:
        raise InputError("kubeconfig", f"no context {context or '(current)'}")
    server = single.cluster.server
    proxy = environment_proxy(server)
    parameters = client_adapter.httpx_parameters(single, timeout, proxy, True)  # type: ignore[arg-type]
    return ApiClient(AiohttpTransport(parameters["verify"], connections), **parameters)


def environment_proxy(server: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The proxy the environment names for the API server at ``server``, as kubectl reads
    it (Go's ``ProxyFromEnvironment``): ``HTTPS_PROXY`` for an https server, ``HTTP_PROXY``
    for http (upper case first, then lower; ``http://`` where it names no scheme); none for
    a loopback host or one ``NO_PROXY`` names (:func:`_bypassed`). With one, every request
    goes through httpx's proxy transport (a tunnel for https)."""
    parts = urlsplit(server)
    host, scheme = parts.hostname, parts.scheme
    proxy = environ.get(f"{scheme.upper()}_PROXY") or environ.get(f"{scheme}_proxy")
    if not proxy or not host or host == "localhost":
        return None
    address = _address(host)
    if address is not None and address.is_loopback:
        return None
    port = parts.port or (443 if scheme == "https" else 80)
    if _bypassed(host, port, environ.get("NO_PROXY") or environ.get("no_proxy") or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` names ``host``: ``*``; an IP address or a CIDR range holding
    it; or a domain, with an optional port — ``example.com`` for it and its subdomains,
    ``.example.com`` and ``*.example.com`` for its subdomains alone."""
    address = _address(host)
    host = host.lower().rstrip(".")
    for raw in no_proxy.lower().split(","):
        entry = raw.strip()
        if entry == "*":
            return True
        if not entry:
            continue
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:  # not a range
                pass
            continue
        named = _address(entry.strip("[]"))
        if named is not None:
            if address == named:
                return True
            continue
        name, _, wanted = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if wanted and wanted != str(port):
            continue
        name = name.removeprefix("*").rstrip(".")
        if name.startswith("."):
            if host.endswith(name):
                return True
        elif host == name or host.endswith(f".{name}"):
            return True
    return False


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:  # a name
        return None
