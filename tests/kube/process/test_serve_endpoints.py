"""``gpufleet serve``'s endpoints, secured as kube-scheduler's are (``kube/process/endpoints.py``,
``kube/process/delegated.py``, ``kube/process/certs.py``): HTTPS
only; the probes answer anyone; ``/metrics`` answers a token the API server authenticates
(TokenReview) and whose user RBAC grants ``get``
on the non-resource URL (SubjectAccessReview) — no token 401, a token RBAC does not grant
403 — against the emulator's reviews, over real HTTP and TLS."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from gpufleet.kube.process.certs import self_signed
from tests.apiserver.rbac import Authorizer, Identity
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node
from tests.kube.process.test_serve_cli import start_serving

JSON = dict[str, Any]
READER = Identity.service_account("monitoring", "prometheus")
STRANGER = Identity.service_account("ops", "robot")
OBJECTS: list[JSON] = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "metrics-reader"},
        "roleRef": {"kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
    },
]


@pytest.fixture
def secured() -> Iterator[Emulator]:
    """An emulator with RBAC: the scheduler runs with the emulator's own token; the
    reader's token may get /metrics, the stranger's nothing."""
    rbac = Authorizer(OBJECTS, {"reader-token": READER, "stranger-token": STRANGER})
    server = Emulator(rbac=rbac).start()
    add_node(server, "n0")
    try:
        yield server
    finally:
        server.stop()


def get(url: str, token: str = "") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, verify=False, timeout=10)


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    return stderr


def test_metrics_need_a_token_the_api_server_authorizes_and_probes_need_none(
    secured: Emulator, tmp_path: Path
) -> None:
    process, base = start_serving(secured, tmp_path, "--leader-elect=false")
    try:
        for probe in ("/healthz", "/livez", "/readyz"):
            assert get(f"{base}{probe}").status_code == 200, probe
        no_token = get(f"{base}/metrics")
        unknown = get(f"{base}/metrics", "forged-token")
        denied = get(f"{base}/metrics", "stranger-token")
        allowed = get(f"{base}/metrics", "reader-token")
        with pytest.raises(httpx.HTTPError):  # no plain HTTP on the secure port
            httpx.get(base.replace("https://", "http://") + "/healthz", timeout=5)
    finally:
        stderr = stop(process)
    assert (no_token.status_code, no_token.text) == (401, "Unauthorized")
    assert (unknown.status_code, unknown.text) == (401, "Unauthorized")
    assert denied.status_code == 403
    assert denied.text == (
        'Forbidden: User "system:serviceaccount:ops:robot" cannot get path "/metrics"'
    )
    assert allowed.status_code == 200
    assert "scheduler_pending_pods" in allowed.text
    assert secured.rbac is not None
    assert [i.user for i, _ in secured.rbac.denied] == []  # the scheduler itself is admin
    assert "Traceback" not in stderr


def test_a_review_the_api_server_fails_refuses_the_scrape(
    secured: Emulator, tmp_path: Path
) -> None:
    process, base = start_serving(secured, tmp_path, "--leader-elect=false")
    try:
        secured.faults.fail(1, code=500, method="POST", path="/tokenreviews$")
        authentication_failed = get(f"{base}/metrics", "reader-token")
        secured.faults.fail(1, code=500, method="POST", path="/subjectaccessreviews$")
        authorization_failed = get(f"{base}/metrics", "reader-token")
        allowed = get(f"{base}/metrics", "reader-token")
    finally:
        stderr = stop(process)
    assert authentication_failed.status_code == 401
    assert authorization_failed.status_code == 500
    assert allowed.status_code == 200
    assert "cannot authenticate a request to /metrics: TokenReview: HTTP 500" in stderr
    assert "cannot authorize system:serviceaccount:monitoring:prometheus" in stderr


def test_always_allowed_paths_serve_metrics_without_credentials_for_a_local_run(
    secured: Emulator, tmp_path: Path
) -> None:
    allow = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"
    process, base = start_serving(secured, tmp_path, "--leader-elect=false", allow)
    try:
        response = get(f"{base}/metrics")
    finally:
        stop(process)
    assert response.status_code == 200


def served_certificate(base: str) -> x509.Certificate:
    host, port = base.removeprefix("https://").split(":")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_the_self_signed_certificate_names_loopback_and_a_cert_dir_keeps_it(
    secured: Emulator, tmp_path: Path
) -> None:
    certs = tmp_path / "certs"
    seen = []
    for _ in range(2):
        process, base = start_serving(
            secured, tmp_path, "--leader-elect=false", f"--cert-dir={certs}"
        )
        try:
            seen.append(served_certificate(base))
        finally:
            stop(process)
    assert seen[0] == seen[1]  # made once, reused at the next start
    names = seen[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1", "::1"}
    assert oct((certs / "gpufleet.key").stat().st_mode & 0o777) == "0o600"


def test_a_given_certificate_is_served(secured: Emulator, tmp_path: Path) -> None:
    cert, key = self_signed(["gpufleet.example.com"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    files = [
        f"--tls-cert-file={tmp_path / 'tls.crt'}",
        f"--tls-private-key-file={tmp_path / 'tls.key'}",
    ]
    process, base = start_serving(secured, tmp_path, "--leader-elect=false", *files)
    try:
        served = served_certificate(base)
    finally:
        stop(process)
    assert served == x509.load_pem_x509_certificate(cert)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--port", "10251"), "--port was removed: the endpoints are served over HTTPS"),
        (("--address", "0.0.0.0"), "use --bind-address"),
        (("--bind-address", "localhost:1"), "--bind-address must be an IP address"),
        (
            ("--tls-cert-file", "/etc/hostname"),
            "--tls-cert-file and --tls-private-key-file must be given together",
        ),
        (
            ("--authorization-always-allow-paths", "healthz"),
            "each path must start with /",
        ),
    ],
)
def test_bad_endpoint_options_exit_2_naming_the_option(args: tuple[str, ...], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpufleet", "serve", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.replace("│", " ").split())
    assert "Traceback" not in result.stderr


def test_a_certificate_file_that_is_not_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpufleet",
            "serve",
            f"--tls-cert-file={tmp_path / 'tls.crt'}",
            f"--tls-private-key-file={tmp_path / 'tls.key'}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "tls.crt" in line
    assert "not a PEM certificate and its private key" in line
