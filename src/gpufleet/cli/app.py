"""The ``gpufleet`` command: wiring only; every decision lives in the layers below.

The typer app, its ``--version`` and the commands it composes: ``simulate``
(:mod:`gpufleet.cli.simulate`), ``schedule`` and ``explain`` (:mod:`gpufleet.cli.cycle`),
``sweep`` (:mod:`gpufleet.cli.sweep`), ``serve`` (:mod:`gpufleet.cli.serve`), ``cost``
(:mod:`gpufleet.cli.cost`).
Bad input (a missing file, a wrong column, a bad value in row N) ends with one line on
stderr naming the file, the line and the field, and exit code 2 — never a traceback.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gpufleet import __version__
from gpufleet.cli.cost import cost
from gpufleet.cli.cycle import explain, schedule
from gpufleet.cli.serve import serve
from gpufleet.cli.simulate import simulate
from gpufleet.cli.sweep import sweep
from gpufleet.load.errors import InputError

app = typer.Typer(
    name="gpufleet",
    help="A GPU scheduler for Kubernetes AI clusters: simulate placement policies on real traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's paragraph is one paragraph, not its lines
)


def _print_version(value: bool) -> None:
    # Eager: runs while the options are parsed, before click asks for a command.
    if value:
        typer.echo(f"gpufleet {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    del version  # handled by its eager callback


# In this order in `gpufleet --help`.
app.command()(simulate)
app.command()(sweep)
app.command()(schedule)
app.command()(explain)
app.command()(serve)
app.command()(cost)


CommandLineError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)
"""The base of every error the command line parser raises (an unknown option, a bad value):
click's ``ClickException``, which typer vendors without exporting; found through the one
subclass it does export."""


def main() -> None:
    """Console entry point: bad input and a wrong command line are one line on stderr and
    exit code 2 (``gpufleet`` alone prints its help)."""
    try:
        code = app(standalone_mode=False)
    except InputError as exc:
        sys.stderr.write(f"gpufleet: error: {exc}\n")
        raise SystemExit(2) from None
    except CommandLineError as exc:
        show = getattr(exc, "show", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and show is not None:
            show()
        else:
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "gpufleet"
            formatter = getattr(exc, "format_message", None)
            message = formatter() if formatter is not None else str(exc)
            sys.stderr.write(f"{where}: error: {message} (see '{where} --help')\n")
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except typer.Abort:
        sys.stderr.write("gpufleet: aborted\n")
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)
