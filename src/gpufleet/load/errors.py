"""Bad input, reported as one line that names the file, the line, the field and the fix."""

from __future__ import annotations

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

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        what = f"field {self.field!r}: " if self.field else ""
        return f"{where}: {what}{self.problem}"


@contextmanager
def reading(path: Path, expected: str) -> Iterator[None]:
    """Turn the ways reading ``path`` can fail into one-line :class:`InputError` s."""
    source = str(path)
    try:
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
