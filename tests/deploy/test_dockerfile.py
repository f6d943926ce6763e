"""The Dockerfile's shape, which docker alone could prove: the image is built in one stage
and run from another that is slim, installs gpufleet's wheels and nothing to build with,
and runs ``gpufleet serve`` as a user that is not root."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def stages() -> list[list[str]]:
    """The instructions of each stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append([])
        out[-1].append(line)
    return out


def test_it_builds_in_one_stage_and_runs_in_a_slim_other() -> None:
    builder, final = stages()
    assert builder[0].startswith("FROM python:3.11")
    assert "pip wheel" in " ".join(builder)
    assert final[0] == "FROM python:3.11-slim"


def test_the_final_stage_installs_the_wheels_only() -> None:
    final = " ".join(stages()[-1])
    assert "--no-index" in final  # from the builder's wheels, nothing fetched
    for tool in ("apt-get", "gcc", "g++", "build-essential", "COPY . ", "pip wheel"):
        assert tool not in final


def test_it_runs_gpufleet_serve_as_a_user_that_is_not_root() -> None:
    final = stages()[-1]
    (user,) = [line for line in final if line.startswith("USER ")]
    assert user.split()[1].split(":")[0] == "65532"
    assert final[-2:] == ['ENTRYPOINT ["gpufleet"]', 'CMD ["serve"]']


def test_the_build_context_is_the_package_alone() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line for line in lines if line and not line.startswith("#")]
    assert patterns[:4] == ["*", "!pyproject.toml", "!README.md", "!src/"]
