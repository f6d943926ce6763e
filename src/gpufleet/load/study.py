"""Read a study file (``kind: Study``, ``gpufleet.io/v1alpha1``) into its runs.

::

    apiVersion: gpufleet.io/v1alpha1
    kind: Study
    metadata:
      name: reservations
    spec:
      experiments:
      - name: philly-weeks                # unique in the study
        protocol: replay                  # fill, replay, autoscale or balance
        traces:                           # each a dimension of the grid
        - path: traces/philly.csv         # relative to this file; or bundled: NAME
          format: philly                  # replay: openb or philly (default: the header's)
        windows:                          # replay: trace time, seconds or durations
        - {since: 1008h, until: 1176h}
        clusters: [{path: cluster.yaml}]  # replay: cluster YAML; fill: openb node CSV
        queues: [{path: queues.yaml}]     # replay: Queue YAML (default: one per tenant)
        prices: [{bundled: prices.yaml}]  # replay: price sheet (default: the bundled one)
        # serving: [{path: DIR}]          # balance: a ServeGen model's folder
        grid:                             # every combination of these values
          policy: [gpufleet]
          reserveAfter: [30m, 6h, 24h, never]
        settings:                         # and these settings, one each
        - {policy: gang-backfill}
        seeds: [42, 43]                   # fill and autoscale: "42-51" or a list

A study expands to the product of its traces, windows, clusters, queues, prices, settings
(the grid's combinations, then the list) and seeds. Every setting names a ``policy``; the
parameters it may set (:data:`PARAMETERS`) are the protocol's. A replay draws no random
numbers, so ``seeds`` is refused there: vary its parameters instead (an autoscaling replay
draws spot availability and interruptions from its seed).

Every fault is one :class:`~gpufleet.load.errors.InputError` naming the file, the study,
the field and what was expected; an unknown field is an error, as in gpufleet's other
kinds. The input files are read (their digests name them) but not parsed: the study's
runner loads each once before any run starts.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.load.errors import InputError, reading
from gpufleet.load.objects.documents import own_kind, own_kind_file
from gpufleet.load.objects.reader import Obj, Reader, duration_seconds
from gpufleet.load.objects.schema import ANY, META, Schema
from gpufleet.load.shown import shown
from gpufleet.load.traces.openb import bundled
from gpufleet.load.traces.replay_inputs import FORMATS
from gpufleet.load.traces.servegen import CHUNK
from gpufleet.model.autoscale import SUPPLY_POLICY_NAMES
from gpufleet.model.balance import LENDING_POLICY_NAMES
from gpufleet.model.study import (
    PROTOCOLS,
    InputFile,
    Study,
    StudyRun,
    Value,
    duration_text,
    setting_text,
)
from gpufleet.plugins.registry import POLICIES, REPLAY_PARAMETERS, REPLAY_POLICIES
from gpufleet.scheduler.room.builtin import builtin_actions

API_VERSION = "gpufleet.io/v1alpha1"
KIND = "Study"
MAX_RUNS = 100_000
"""The most runs one study may expand to (a grid of a few long lists multiplies fast)."""
MAX_SEED = 2**32 - 1
MAX_SERVING_NODES = 100_000
"""The largest serving pool a lending run may have (``simulate --serving-nodes``' bound)."""
DEFAULT_SEED = 42
"""A run's seed where the study gives none (``simulate``'s default); a replay's only one."""

_FILE = {"path": ANY, "bundled": ANY}
_EXPERIMENT: Schema = {
    "name": ANY,
    "protocol": ANY,
    "traces": [{**_FILE, "format": ANY}],
    "windows": [{"since": ANY, "until": ANY}],
    "clusters": [_FILE],
    "queues": [_FILE],
    "prices": [_FILE],
    "serving": [_FILE],
    "grid": ANY,
    "settings": ANY,
    "seeds": ANY,
}
SCHEMA: Schema = {
    "apiVersion": ANY,
    "kind": ANY,
    "metadata": META,
    "spec": {"experiments": [_EXPERIMENT]},
}

RUN_MODEL = ("checkpointInterval", "restartTime")
"""A replay's parameters of how jobs run (``simulate``'s ``--checkpoint-interval`` and
``--restart-time``), beside its policy's (:data:`REPLAY_PARAMETERS`)."""
PARAMETERS: Mapping[str, tuple[str, ...]] = {
    "fill": ("inflate",),
    "replay": (*RUN_MODEL, *REPLAY_PARAMETERS),
    "autoscale": RUN_MODEL,
    "balance": ("servingNodes", "muFactor"),
}
"""The parameters each protocol's settings may give beside ``policy``."""
POLICY_NAMES: Mapping[str, tuple[str, ...]] = {
    "fill": tuple(POLICIES),
    "replay": tuple(REPLAY_POLICIES),
    "autoscale": SUPPLY_POLICY_NAMES,
    "balance": LENDING_POLICY_NAMES,
}
"""The policies each protocol's settings may name."""
_ONLY: Mapping[str, tuple[str, ...]] = {
    "windows": ("replay", "autoscale", "balance"),
    "queues": ("replay",),
    "prices": ("replay", "autoscale", "balance"),
    "seeds": ("fill", "autoscale"),
    "serving": ("balance",),
}
"""Dimensions that apply to some protocols only."""


def read_parameter(name: str, raw: object, protocol: str) -> Value:
    """The value of parameter ``name`` of a ``protocol`` setting, from YAML or from text
    (``simulate --param``). ValueError says what was expected."""
    if name not in PARAMETERS[protocol]:
        known = ", ".join(PARAMETERS[protocol]) or "none"
        raise ValueError(f"a parameter of the {protocol} protocol ({known}), got {name!r}")
    return _READERS.get(name, _duration)(raw)


def _serving_nodes(raw: object) -> Value:
    whole = not isinstance(raw, bool) and isinstance(raw, int | str) and str(raw).isdigit()
    if not whole or not 1 <= int(str(raw)) <= MAX_SERVING_NODES:
        raise ValueError(
            f"a whole number of nodes from 1 to {MAX_SERVING_NODES:,}, got {shown(raw)}"
        )
    return float(int(str(raw)))


def _bounded(low: float, high: float, *, above: bool = False) -> Callable[[object], Value]:
    def read(raw: object) -> Value:
        number = _number(raw)
        if number is None or not (low < number if above else low <= number) or number > high:
            least = f"above {low:g}" if above else f"from {low:g}"
            raise ValueError(f"a number {least} and at most {high:g}, got {shown(raw)}")
        return number

    return read


def _flag(raw: object) -> Value:
    if isinstance(raw, bool):
        return raw
    if raw in {"true", "false"}:
        return raw == "true"
    raise ValueError(f"true or false, got {shown(raw)}")


def _reserve_after(raw: object) -> Value:
    if raw in {"never", math.inf}:
        return math.inf
    seconds = _seconds(raw)
    if seconds is None or seconds <= 0:
        raise ValueError(
            "a duration above 0 such as '90s', '30m' or '6h', or seconds or never, got "
            + shown(raw)
        )
    return seconds


def _duration(raw: object) -> Value:
    seconds = _seconds(raw)
    if seconds is None:
        raise ValueError(
            f"a duration 0 or more such as '90s', '30m' or '6h', or seconds, got {shown(raw)}"
        )
    return seconds


def parse_parameter(text: str, protocol: str) -> tuple[str, Value]:
    """``NAME=VALUE`` (``simulate --param``) read as :func:`read_parameter` reads it."""
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"NAME=VALUE, got {text!r}")
    return name, read_parameter(name, value, protocol)


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    try:
        number = float(raw) if isinstance(raw, int | float | str) else math.nan
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _seconds(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        try:
            seconds = float(raw)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return duration_seconds(raw) if isinstance(raw, str) else None


def _actions(raw: object) -> Value:
    known = list(builtin_actions())
    if isinstance(raw, str):
        names = [] if raw in {"", "none"} else raw.split(",")
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        names = list(raw)
    else:
        raise ValueError(f"a list of actions ({', '.join(known)}), got {shown(raw)}")
    for name in names:
        if name not in known:
            raise ValueError(f"actions among {', '.join(known)}, got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"each action once, got {shown(raw)}")
    return tuple(names)


_READERS: Mapping[str, Callable[[object], Value]] = {
    "servingNodes": _serving_nodes,
    "muFactor": _bounded(0.01, 100),
    "inflate": _bounded(0, 100, above=True),
    "topology": _flag,
    "readsCheckpoints": _flag,
    "actions": _actions,
    "reserveAfter": _reserve_after,
}
"""How each parameter's value is read; the others are durations (:func:`_duration`)."""


def load_study(path: Path) -> Study:
    """The study in ``path``; its input files are found relative to ``path``'s folder."""
    return _study(own_kind_file(path, API_VERSION, KIND, SCHEMA), path.parent)


def read_study(obj: Obj, source: str, base: Path) -> Study:
    """A study from its object; ``source`` names it in errors, its files are under ``base``."""
    return _study(own_kind(obj, source, API_VERSION, KIND, SCHEMA), base)


def _study(r: Reader, base: Path) -> Study:
    experiments = r.sequence("spec.experiments")
    if not experiments:
        raise r.fail("spec.experiments", "at least one experiment", experiments)
    files = _Files(r, base)
    runs: list[StudyRun] = []
    names: set[str] = set()
    for i, raw in enumerate(experiments):
        field = f"spec.experiments[{i}]"
        if not isinstance(raw, dict):
            raise r.fail(field, "an experiment (a mapping)", raw)
        name = raw.get("name")
        if not isinstance(name, str) or not name or name in names:
            raise r.fail(f"{field}.name", "a name no other experiment has", name)
        names.add(name)
        runs += _experiment(r, raw, field, name, files=files, room=MAX_RUNS - len(runs))
    return Study(r.name, r.source, tuple(runs))


class _Files:
    """Each input file read once: its digest, by the path it was found at."""

    def __init__(self, r: Reader, base: Path) -> None:
        self.r, self.base = r, base
        self.digests: dict[tuple[Path, bool], str] = {}

    def read(self, raw: object, field: str, role: str) -> InputFile:
        r = self.r
        if not isinstance(raw, dict):
            raise r.fail(field, "a file: {path: PATH} or {bundled: NAME}", raw)
        given = [k for k in ("path", "bundled") if raw.get(k) is not None]
        if len(given) != 1 or not isinstance(raw[given[0]], str) or not raw[given[0]]:
            raise r.fail(field, "exactly one of path and bundled, a non-empty string", raw)
        text = raw[given[0]]
        if given[0] == "bundled":
            found = bundled(text)
            shelf = bundled("README.md").parent
            if "/" in text or "\\" in text or not found.is_file():
                shipped = sorted(p.name for p in shelf.iterdir() if p.suffix != ".md")
                raise r.fail(f"{field}.bundled", f"one of {', '.join(shipped)}", text)
            name = f"bundled:{text}"
        else:
            found = self.base / text
            name = text
        try:
            found = found.resolve()
        except (OSError, RuntimeError) as error:  # a loop of symbolic links
            raise InputError(str(found), f"cannot be read ({error})") from None
        folder = role == "serving"
        if (found, folder) not in self.digests:
            if folder:
                data = pack_folder(found)
            else:
                with reading(found, f"the {role} file"):
                    data = found.read_bytes()
            self.digests[found, folder] = hashlib.sha256(data).hexdigest()
        return InputFile(role, name, str(found), self.digests[found, folder])


def pack_folder(path: Path) -> bytes:
    """The client files of ServeGen model folder ``path`` (``chunk-<n>-trace.csv``, what
    its reader reads; other files are not its input) as one blob, in name order: each its
    name, its size and its bytes (what a study's digest and its workers read;
    :func:`unpack_folder` writes it out again). Each file at most the input size bound."""
    if not path.is_dir():
        raise InputError(str(path), "expected a folder (a ServeGen model's client CSVs)")
    try:
        entries = sorted(e for e in path.iterdir() if CHUNK.fullmatch(e.name) and e.is_file())
    except OSError as exc:
        raise InputError(str(path), f"cannot be read ({exc.strerror})") from None
    out = bytearray()
    for entry in entries:
        with reading(entry, "a client CSV of the folder"):
            data = entry.read_bytes()
        out += f"{entry.name}\n{len(data)}\n".encode() + data
    return bytes(out)


def unpack_folder(blob: bytes, into: Path) -> None:
    """The files of a :func:`pack_folder` blob, written into folder ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    at = 0
    while at < len(blob):
        name_end = blob.index(b"\n", at)
        size_end = blob.index(b"\n", name_end + 1)
        name = blob[at:name_end].decode()
        size = int(blob[name_end + 1 : size_end])
        (into / Path(name).name).write_bytes(blob[size_end + 1 : size_end + 1 + size])
        at = size_end + 1 + size


def _experiment(
    r: Reader, raw: Obj, field: str, name: str, *, files: _Files, room: int
) -> list[StudyRun]:
    protocol = raw.get("protocol")
    if protocol not in PROTOCOLS:
        raise r.fail(f"{field}.protocol", f"one of {', '.join(PROTOCOLS)}", protocol)
    for key, only in _ONLY.items():
        if raw.get(key) is not None and protocol not in only:
            why = " (a replay draws no random numbers: vary its parameters)" * (key == "seeds")
            which = " and ".join(only)
            raise InputError(
                r.where, f"applies to protocol {which} only{why}", field=f"{field}.{key}"
            )
    traces = _list(r, raw, f"{field}.traces", required=True)
    trace_files = []
    for j, t in enumerate(traces):
        where = f"{field}.traces[{j}]"
        if not isinstance(t, dict):
            raise r.fail(where, "a file: {path: PATH} or {bundled: NAME}, and its format", t)
        fmt = t.get("format")
        if fmt is not None and (protocol == "fill" or fmt not in FORMATS):
            expected = f"one of {', '.join(FORMATS)}" if protocol != "fill" else "no format"
            raise r.fail(f"{where}.format", f"{expected} (a fill reads openb CSV)", fmt)
        file = files.read({k: v for k, v in t.items() if k != "format"}, where, "trace")
        trace_files.append((file, fmt))
    windows = [
        _window(r, w, f"{field}.windows[{j}]")
        for j, w in enumerate(_list(r, raw, f"{field}.windows"))
    ] or [(0.0, None)]
    _once_each(r, f"{field}.windows", windows, "window")
    _once_each(r, f"{field}.traces", [(f.digest, fmt) for f, fmt in trace_files], "trace")
    role = {"clusters": "cluster", "queues": "queues", "prices": "prices", "serving": "serving"}
    inputs: dict[str, list[InputFile | None]] = {}
    for key, what in role.items():
        entries = _list(r, raw, f"{field}.{key}")
        inputs[key] = [files.read(e, f"{field}.{key}[{j}]", what) for j, e in enumerate(entries)]
        _once_each(r, f"{field}.{key}", [f.digest for f in inputs[key] if f], f"{what} file")
        inputs[key] = inputs[key] or [None]
    if protocol == "balance" and inputs["serving"] == [None]:
        raise InputError(
            r.where, "expected a ServeGen model's folder: {path: DIR}", field=f"{field}.serving"
        )
    settings = _settings(r, raw, field, protocol)
    seeds = _seeds(r, raw.get("seeds"), f"{field}.seeds") or [DEFAULT_SEED]
    dims = (
        trace_files, windows, inputs["clusters"], inputs["queues"], inputs["prices"],
        inputs["serving"],
    )  # fmt: skip
    count = math.prod(len(d) for d in dims) * len(settings) * len(seeds)
    if count > room:
        raise InputError(
            r.where,
            f"expands to {count:,} runs, and the study to more than it may hold ({MAX_RUNS:,})",
            field=field,
        )
    return [
        StudyRun(
            name, protocol, trace, fmt, cluster, queues, prices, window, setting, seed, serving
        )
        for (trace, fmt), window, cluster, queues, prices, serving in itertools.product(*dims)
        for setting in settings
        for seed in seeds
    ]


def _once_each(r: Reader, field: str, values: Sequence[object], what: str) -> None:
    """A dimension lists each value once: the same file (by its bytes) or window twice
    would run every run twice, and the report would count them as two."""
    for j, value in enumerate(values):
        if value in values[:j]:
            raise InputError(
                r.where, f"expected each {what} once; entry {j} repeats entry "
                f"{values.index(value)}", field=f"{field}[{j}]",
            )  # fmt: skip


def _list(r: Reader, raw: Obj, field: str, *, required: bool = False) -> list[Any]:
    value = raw.get(field.rsplit(".", 1)[-1])
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value:
        raise r.fail(field, "a non-empty list", value)
    return value


def _window(r: Reader, raw: object, field: str) -> tuple[float, float | None]:
    if not isinstance(raw, dict):
        raise r.fail(field, "a window: {since: DURATION, until: DURATION}", raw)
    since = _seconds(raw.get("since", 0))
    if since is None:
        raise r.fail(f"{field}.since", "seconds or a duration such as '1008h'", raw.get("since"))
    until_raw = raw.get("until")
    until = None if until_raw is None else _seconds(until_raw)
    if until_raw is not None and (until is None or until <= since):
        after = f"seconds or a duration after since ({duration_text(since)})"
        raise r.fail(f"{field}.until", after, until_raw)
    return since, until


def _settings(
    r: Reader, raw: Obj, field: str, protocol: str
) -> list[tuple[tuple[str, Value], ...]]:
    """The grid's combinations (in its keys' order), then the listed settings; each checked,
    and none twice."""
    out: list[tuple[tuple[str, Value], ...]] = []
    grid = raw.get("grid")
    if grid is not None:
        if not isinstance(grid, dict) or not grid:
            raise r.fail(f"{field}.grid", "a mapping of parameter to a list of values", grid)
        axes = []
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise r.fail(f"{field}.grid.{key}", "a non-empty list of values", values)
            axes.append([(str(key), v) for v in values])
        if math.prod(len(a) for a in axes) > MAX_RUNS:
            raise r.fail(f"{field}.grid", f"at most {MAX_RUNS:,} combinations", "more")
        out += [
            _setting(r, dict(combo), f"{field}.grid", protocol)
            for combo in itertools.product(*axes)
        ]
    listed = raw.get("settings")
    if listed is not None:
        if not isinstance(listed, list) or not listed:
            raise r.fail(f"{field}.settings", "a non-empty list of settings", listed)
        for j, item in enumerate(listed):
            if not isinstance(item, dict):
                raise r.fail(f"{field}.settings[{j}]", "a setting (a mapping)", item)
            out.append(_setting(r, item, f"{field}.settings[{j}]", protocol))
    if not out:
        raise InputError(r.where, "expected a grid or settings", field=f"{field}.grid")
    seen: set[tuple[tuple[str, Value], ...]] = set()
    for setting in out:
        key = tuple(sorted(setting, key=lambda kv: kv[0]))
        if key in seen:
            text = " ".join(setting_text(k, v) for k, v in setting)
            raise InputError(r.where, f"the setting {text} is given twice", field=field)
        seen.add(key)
    return out


def _setting(
    r: Reader, raw: Mapping[str, object], field: str, protocol: str
) -> tuple[tuple[str, Value], ...]:
    policies: Sequence[str] = POLICY_NAMES[protocol]
    policy = raw.get("policy")
    if policy not in policies:
        expected = f"a policy of the {protocol} protocol ({', '.join(policies)})"
        raise r.fail(f"{field}.policy", expected, policy)
    out: list[tuple[str, Value]] = [("policy", str(policy))]
    for key, value in raw.items():
        if key == "policy":
            continue
        try:
            out.append((key, read_parameter(key, value, protocol)))
        except ValueError as error:
            raise InputError(r.where, f"expected {error}", field=f"{field}.{key}") from None
    return tuple(out)


def _seeds(r: Reader, raw: object, field: str) -> list[int]:
    if raw is None:
        return []
    if isinstance(raw, str):
        first, sep, last = raw.partition("-")
        if first.isdigit() and (not sep or last.isdigit()):
            lo, hi = int(first), int(last if sep else first)
            if lo <= hi <= MAX_SEED and hi - lo < MAX_RUNS:
                return list(range(lo, hi + 1))
    elif (
        isinstance(raw, list)
        and raw
        and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_SEED for s in raw)
        and len(set(raw)) == len(raw)
    ):
        return list(raw)
    raise r.fail(field, "a seed range such as '42-51' or a list of distinct seeds >= 0", raw)
