"""Output files written whole or not at all, and output paths checked before a run.

A run that fails halfway (an error, a signal, a full disk) must never leave a file that
looks complete: each file is written to a temporary file beside it and renamed over the
target in one step (a rename, atomic on one filesystem). And a path that cannot take
the output — an existing file where a directory is wanted, a directory where a file is, a
parent that does not exist or cannot be written — is refused before the run, in one line
naming the option, not after minutes of work.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


class OutputPathError(ValueError):
    """An output path that cannot take the output; the message names the option."""


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; renamed over ``path`` when the block ends
    without an error, removed otherwise. A symbolic link is written through (its target
    replaced, the link kept); the file gets the mode of the one it replaces, else the
    usual mode of a new file (0666 less the umask), not the temporary file's 0600."""
    if path.is_symlink():
        path = path.resolve()
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        temporary.chmod(_mode(path))
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def _mode(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole (UTF-8), or leave ``path`` as it was."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def _writable_parent(path: Path, option: str) -> None:
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {path}: {parent} cannot be written")


def check_directory(path: Path, option: str) -> None:
    """``path`` can be the output directory: a directory, or nothing yet under a writable
    parent (it is made)."""
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path}: exists and is not a directory")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputPathError(f"{option} {path}: cannot be written")
        return
    _writable_parent(path, option)


def check_file(path: Path, option: str) -> None:
    """``path`` can be an output file: not a directory nor any other file that is not a
    regular one (a device, a pipe: the file written would replace it), its directory exists
    and can be written."""
    if path.is_dir():
        raise OutputPathError(f"{option} {path}: is a directory, not a file")
    if path.exists() and not path.is_file():
        raise OutputPathError(
            f"{option} {path}: is not a regular file (a device or a pipe); give a file, "
            "or '-' for stdout"
        )
    if not path.absolute().parent.is_dir():
        raise OutputPathError(f"{option} {path}: its directory does not exist")
    _writable_parent(path, option)
