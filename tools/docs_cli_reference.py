"""The documentation site's CLI reference page, written from the typer app at build time.

A MkDocs hook (``mkdocs.yml``, ``hooks:``): ``on_files`` adds ``cli-reference.md``, made by
walking ``typer.main.get_command(app)``, so every command and option of ``gpufleet`` is on the
page and the page cannot drift from the code. ``render()`` is the page's text (the tests read
it).
"""

from __future__ import annotations

from typing import Any

import typer.main
from typer.core import TyperGroup

from gpufleet.cli.app import app

PAGE = "cli-reference.md"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option_row(param: Any, ctx: Any) -> str:
    """One row: the option's names, then its metavar, default and help as ``--help`` shows them."""
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    record = param.get_help_record(ctx)
    shown, help_text = record if record is not None else ("", param.help or "")
    metavar = shown.split(" ", 1)[1] if " " in shown.split(", ")[-1] else ""
    value = f"`{_cell(metavar)}`" if metavar else ""
    return f"| {names} | {value} | {_cell(help_text)} |"


def _command(name: str, command: Any, parent: Any) -> list[str]:
    ctx = command.context_class(command, info_name=name, parent=parent)
    lines = [f"## `gpufleet {name}`", ""]
    if command.help:
        lines += [command.help.strip(), ""]
    lines += ["```", command.get_usage(ctx), "```", ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    for argument in arguments:
        help_text = _cell(getattr(argument, "help", None) or "")
        lines.append(
            f"- argument `{argument.name.upper()}`" + (f": {help_text}" if help_text else "")
        )
    if arguments:
        lines.append("")
    options = [p for p in command.params if p.param_type_name == "option"]
    if options:
        lines += ["| Option | Value | Meaning |", "|---|---|---|"]
        lines += [_option_row(p, ctx) for p in options]
        lines.append("")
    return lines


def render() -> str:
    """The reference page: the top-level options, then every command with its options."""
    root = typer.main.get_command(app)
    if not isinstance(root, TyperGroup):
        raise TypeError("gpufleet's typer app is expected to be a group of commands")
    ctx = root.context_class(root, info_name="gpufleet")
    lines = [
        "# CLI reference",
        "",
        "Written from the command's own definitions when the site is built. The command",
        "pages explain what the options do together; this page lists every one.",
        "",
        "## `gpufleet`",
        "",
        "| Option | Value | Meaning |",
        "|---|---|---|",
        *(_option_row(p, ctx) for p in root.params if p.param_type_name == "option"),
        "",
    ]
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        assert command is not None
        lines += _command(name, command, ctx)
    return "\n".join(lines)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File  # noqa: PLC0415 (only the docs' environment has MkDocs)

    files.append(File.generated(config, PAGE, content=render()))
    return files
