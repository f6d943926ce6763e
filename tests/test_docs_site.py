"""The documentation site (``mkdocs.yml``, ``docs/``): it builds strictly, a link to a section
that does not exist fails that build, and the CLI reference it generates
(``tools/docs_cli_reference.py``) names every option of every command."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer.main
import yaml

from gpufleet.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).parent / "mkdocs"
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def reference() -> ModuleType:
    """The hook that writes the CLI reference page, loaded from its file."""
    path = ROOT / "tools" / "docs_cli_reference.py"
    spec = importlib.util.spec_from_file_location("docs_cli_reference", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        check=False,
    )


def site_config(tmp_path: Path, docs: Path) -> Path:
    """``mkdocs.yml`` with the pages of ``docs`` and the site written under ``tmp_path``."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(tmp_path / "site")
    config["hooks"] = [str(ROOT / h) for h in config["hooks"]]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = build(site_config(tmp_path, ROOT / "docs"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "cli-reference" / "index.html").is_file()


def test_a_link_to_a_section_that_does_not_exist_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "broken.md").write_text(
        "# Broken\n\nSee [the cost model](cost.md#no-such-section).\n", encoding="utf-8"
    )
    config = site_config(tmp_path, docs)
    settings = yaml.safe_load(config.read_text(encoding="utf-8"))
    settings["nav"].append({"Broken": "broken.md"})
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    result = build(config)
    assert result.returncode != 0
    assert "no-such-section" in result.stderr


def test_the_cli_reference_names_every_option_of_every_command() -> None:
    page = reference().render()
    sections = {s.split("`", 1)[0]: s for s in page.split("## `gpufleet")[1:]}
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="gpufleet")
    commands = {"": root} | {
        f" {name}": root.get_command(ctx, name)  # type: ignore[attr-defined]
        for name in root.list_commands(ctx)  # type: ignore[attr-defined]
    }
    missing = [
        f"gpufleet{name} {option}"
        for name, command in commands.items()
        for param in command.params
        if param.param_type_name == "option"
        for option in [*param.opts, *param.secondary_opts]
        if f"`{option}`" not in sections.get(name, "")
    ]
    assert not missing
    assert set(commands) == set(sections)


def test_the_readme_is_under_12_kb() -> None:
    assert len((ROOT / "README.md").read_bytes()) < 12 * 1024
