"""A policy study (``kind: Study``) as values: the runs it expands to, each a pure function
of its inputs (``study/`` runs them; ``load/study.py`` reads the file; ``docs/sweep.md``).

A run is one trace (with its format and, for a replay, a window of its time), one cluster,
price sheet and set of queues (each an input file, or the default the ``simulate`` command
takes), one setting (a policy and its parameters) and one seed. Input files are named by
the digest of their bytes, so that a run's identity is what it computes on, not where the
files lay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

PROTOCOLS = ("fill", "replay", "autoscale", "balance")

Value = str | float | bool | tuple[str, ...]
"""A setting's value: a policy name, a number (seconds for a duration), a flag, a list of
action names."""


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input file of a study: ``role`` (trace, cluster, queues, prices), ``name`` as the
    study gives it (a path relative to the study file, or ``bundled:NAME``), ``path`` where
    this machine reads it, ``digest`` the SHA-256 of its bytes."""

    role: str
    name: str
    path: str
    digest: str

    @property
    def basename(self) -> str:
        """The file's own name where it was found (``..`` and links resolved)."""
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class StudyRun:
    """One run of a study (see the module docstring); ``setting`` holds the policy first,
    then the parameters in the order the study gives them."""

    experiment: str
    protocol: str
    trace: InputFile
    trace_format: str | None
    cluster: InputFile | None
    queues: InputFile | None
    prices: InputFile | None
    window: tuple[float, float | None]
    setting: tuple[tuple[str, Value], ...]
    seed: int
    serving: InputFile | None = None
    """A lending run's serving load: a ServeGen model's folder of client CSVs."""

    @property
    def policy(self) -> str:
        return str(self.setting[0][1])

    @property
    def parameters(self) -> dict[str, Value]:
        return dict(self.setting[1:])

    @property
    def files(self) -> tuple[InputFile, ...]:
        found = (self.trace, self.cluster, self.queues, self.prices, self.serving)
        return tuple(f for f in found if f)

    def setting_label(self) -> str:
        """``gpufleet reserveAfter=6h topology=false``: the policy and its parameters."""
        return labelled(self.policy, dict(self.setting[1:]))

    def inputs_label(self) -> str:
        """The trace, window, cluster, queues and prices of the run, as the study names
        them."""
        parts = [self.trace.name]
        since, until = self.window
        if since or until is not None:
            stop = "end" if until is None else duration_text(until)
            parts.append(f"{duration_text(since)}-{stop}")
        parts += [f.name for f in (self.cluster, self.queues, self.prices, self.serving) if f]
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Study:
    """A study file read: its name, where it came from, and its runs in the file's order."""

    name: str
    source: str
    runs: tuple[StudyRun, ...]

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.experiment for r in self.runs))


_UNITS = (("h", 3600.0), ("m", 60.0), ("s", 1.0))


def duration_text(seconds: float) -> str:
    """Seconds as Kubernetes writes a duration: ``6h``, ``1h30m``, ``90s``; ``never``."""
    if math.isinf(seconds):
        return "never"
    if seconds == 0 or seconds != int(seconds):
        return f"{number_text(seconds)}s"
    out, left = "", int(seconds)
    for unit, size in _UNITS:
        whole, left = divmod(left, int(size))
        if whole:
            out += f"{whole}{unit}"
    return out


DURATIONS = frozenset({"checkpointInterval", "restartTime", "reserveAfter"})
"""The parameters whose values are seconds, written as durations."""


def value_text(value: Value | float) -> str:
    """A value as the study and ``simulate --param`` write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value) or "none"
    if isinstance(value, float | int):
        return number_text(value)
    return value


def number_text(value: float) -> str:
    """A number written exactly, whole where it is and never with an exponent, as an option
    or a duration takes it (``1.3``, ``1000000.5``, ``0.00001``, ``42``)."""
    if float(value).is_integer():
        return str(int(value))
    text = repr(float(value))
    return format(Decimal(text), "f") if "e" in text else text


def setting_text(name: str, value: Value) -> str:
    """``name=value``, a duration written as one."""
    if name in DURATIONS and isinstance(value, float):
        return f"{name}={duration_text(value)}"
    return f"{name}={value_text(value)}"


def labelled(name: str, parameters: Mapping[str, Value]) -> str:
    """``gpufleet reserveAfter=6h``: a policy and the parameters set on it."""
    return " ".join([name, *(setting_text(k, v) for k, v in parameters.items())])
