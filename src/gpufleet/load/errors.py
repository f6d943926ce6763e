"""Bad input, reported as one line that names the file, the line, the field and the fix."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class InputError(Exception):
    """Input that gpufleet cannot use. The CLI prints :meth:`__str__` and exits 2."""

    def __init__(
        self, source: str, problem: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(problem)
        self.source, self.problem, self.line, self.field = source, problem, line, field

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str], dict[str, object]]:
        # Pickled (a study's worker sends it back) as its fields, not as Exception.args.
        return (type(self), (self.source, self.problem), {"line": self.line, "field": self.field})

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        what = f"field {self.field!r}: " if self.field else ""
        return f"{where}: {what}{self.problem}"


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The largest input file gpufleet reads (over 70 times the largest bundled trace, Philly's
3.4 MB); ``GPUFLEET_MAX_INPUT_BYTES`` overrides it."""


def limit_from_env(variable: str, default: int) -> int:
    """A bound on work that the environment variable ``variable`` overrides (ASCII digits;
    anything else leaves ``default``)."""
    raw = os.environ.get(variable, "")
    return int(raw) if raw.isascii() and raw.isdigit() else default


def max_input_bytes() -> int:
    return limit_from_env("GPUFLEET_MAX_INPUT_BYTES", MAX_INPUT_BYTES)


def _readable(path: Path, expected: str) -> None:
    """``path`` is a regular file of at most :func:`max_input_bytes` (a device such as
    ``/dev/zero`` or a pipe could be read without end)."""
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError
    if not stat.S_ISREG(info.st_mode):
        raise InputError(str(path), f"is not a regular file, expected {expected}")
    limit = max_input_bytes()
    if info.st_size > limit:
        raise InputError(
            str(path),
            f"is {info.st_size:,} bytes, more than gpufleet reads ({limit:,}; set "
            "GPUFLEET_MAX_INPUT_BYTES to read larger files)",
        )


@contextmanager
def reading(path: Path, expected: str) -> Iterator[None]:
    """Turn the ways reading ``path`` can fail into one-line :class:`InputError` s; refuse
    what is not a regular file of a bounded size before anything is read."""
    source = str(path)
    try:
        _readable(path, expected)
        yield
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except IsADirectoryError:
        raise InputError(source, f"is a directory, expected {expected}") from None
    except UnicodeDecodeError:
        raise InputError(source, f"is not UTF-8 text, expected {expected}") from None
    except OSError as exc:
        raise InputError(source, f"cannot be read ({exc.strerror})") from None


class InputWarning(UserWarning):
    """Input gpufleet reads, but not all of: objects skipped, fields it does not know."""


def warn_default(message: str) -> None:
    """Where a loader's warnings go unless its caller collects them (the CLI prints them on
    stderr as ``Warning: ...``, as kubectl does)."""
    warnings.warn(message, InputWarning, stacklevel=3)
