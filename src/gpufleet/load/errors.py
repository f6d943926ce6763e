"""Bad input, reported as one line that names the file, the line, the field and the fix."""

from __future__ import annotations


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
