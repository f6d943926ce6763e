"""A study run whole: each run's result taken from the cache or computed, and kept.

:func:`sweep` keys every run (:func:`~gpufleet.study.runs.run_key`), takes what the cache
holds, checks the inputs of the rest on this machine (a bad file stops the study before
anything runs, naming it), and hands them to an executor. Each result is written to the
cache as it arrives, so a study that is interrupted — a worker killed, the machine
rebooted, the command stopped — reruns only what is missing; a study that is extended
(a new setting, a new seed) computes only what is new. Runs that appear twice (the same
inputs in two experiments) are computed once.

A result computed with other gpufleet code than this machine's (a Ray cluster on another
image) is refused: it is reported as that run's error, not cached.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.load.errors import InputError
from gpufleet.load.study import pack_folder
from gpufleet.model.study import Study, StudyRun
from gpufleet.report.files import write_text
from gpufleet.report.study import RunRow
from gpufleet.study.execute import Executor
from gpufleet.study.runs import Blobs, check, check_key, code_digest, result_policy, run_key


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run of a study: its result (None: failed, ``error`` says why), whether it came
    from the cache, and where and when it ran (``timing``: host, pid, started, ended,
    busy_s, as :func:`~gpufleet.study.runs.execute` tells them)."""

    index: int
    run: StudyRun
    key: str
    result: dict[str, Any] | None
    error: str | None = None
    cached: bool = False
    timing: dict[str, Any] = field(default_factory=dict)

    def row(self) -> RunRow:
        """The run as the report shows it."""
        run = self.run
        return RunRow(
            run.experiment,
            run.protocol,
            run.inputs_label(),
            run.setting_label(),
            run.seed,
            self.result,
            self.error,
            self.cached,
        )


class ResultCache:
    """Results by run key under ``root``: one JSON file each, written atomically, two
    levels deep (``ab/abcdef....json``), with the SHA-256 of the result it holds."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, run: StudyRun) -> dict[str, Any] | None:
        """The result kept for ``run`` under ``key``, if it is one: whole (its digest
        matches, no NaN), of the run it says (protocol, setting, seed, window, format),
        naming the policy and seed of ``run``. Anything else — a file cut short, edited,
        copied from another key — is a miss, computed again."""
        try:
            text = self._path(key).read_text(encoding="utf-8")
            doc = json.loads(text, parse_constant=_refuse)
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("result"), dict):
            return None
        result, said = doc["result"], doc.get("run")
        if doc.get("sha256") != _digest(result) or not isinstance(said, dict):
            return None
        mine = describe(run)
        if any(said.get(k) != mine[k] for k in ("protocol", "setting", "seed", "window", "format")):
            return None
        seeded = run.protocol != "balance"  # a lending replay draws nothing: no seed
        if (seeded and result.get("seed") != run.seed) or result.get("policy") != result_policy(
            run
        ):
            return None
        return doc

    def put(self, key: str, doc: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({**doc, "sha256": _digest(doc["result"])}, sort_keys=True))


def _digest(result: object) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()


Progress = Callable[[Outcome], None]


def _blobs(study: Study, runs: list[StudyRun]) -> Blobs:
    """The bytes of the runs' input files, each checked against the digest the study was
    read with (a file changed since is an error, not a silently different input)."""
    out: dict[str, tuple[str, bytes]] = {}
    for run in runs:
        for f in run.files:
            if f.digest in out:
                continue
            data = pack_folder(Path(f.path)) if f.role == "serving" else Path(f.path).read_bytes()
            if hashlib.sha256(data).hexdigest() != f.digest:
                raise InputError(f.path, f"changed while {study.source} was read; run it again")
            out[f.digest] = (f.basename, data)
    return out


def sweep(
    study: Study,
    executor: Executor,
    cache: ResultCache,
    *,
    warn: Callable[[str], None],
    on_start: Callable[[int, int], None] | None = None,
    on_done: Progress | None = None,
) -> list[Outcome]:
    """Every run of ``study`` (see the module docstring), in the study's order.
    ``on_start(cached, to_compute)`` is told before the runs start; ``on_done`` each
    outcome computed, as it arrives."""
    code = code_digest()
    keys = [run_key(run, code) for run in study.runs]
    outcomes: dict[int, Outcome] = {}
    first: dict[str, int] = {}
    missing: list[tuple[int, StudyRun]] = []
    for i, (run, key) in enumerate(zip(study.runs, keys, strict=True)):
        doc = cache.get(key, run)
        if doc is not None:
            timing = doc.get("timing")
            timing = timing if isinstance(timing, dict) else {}
            outcomes[i] = Outcome(i, run, key, doc["result"], cached=True, timing=timing)
        elif key not in first:
            first[key] = i
            missing.append((i, run))
    if on_start is not None:
        on_start(len(outcomes), len(missing))
    if missing:
        _check(study, [run for _, run in missing], warn)
        blobs = _blobs(study, [run for _, run in missing])
        missing.sort(key=lambda item: _size(item[1], blobs), reverse=True)
        keeper = _Keeper(study, keys, code, cache, warn, outcomes, on_done)
        scratch = tempfile.mkdtemp(prefix="gpufleet-study-")
        try:
            executor.run(missing, blobs, scratch, keeper.done)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        for i, run in missing:  # an executor that lost a run without a word
            if i not in outcomes:
                outcomes[i] = Outcome(i, run, keys[i], None, error="the executor gave no result")
    for i, key in enumerate(keys):  # a run given twice takes the outcome of its first
        if i not in outcomes:
            o = outcomes[first[key]]
            outcomes[i] = Outcome(i, study.runs[i], key, o.result, o.error, o.cached, o.timing)
    return [outcomes[i] for i in range(len(study.runs))]


def _check(study: Study, runs: list[StudyRun], warn: Callable[[str], None]) -> None:
    """Each distinct set of inputs checked once; an error names the study and experiment."""
    checked: set[tuple[object, ...]] = set()
    for run in runs:
        if check_key(run) in checked:
            continue
        try:
            check(run, warn)
        except InputError as error:
            raise InputError(
                f"{study.source}: experiment {run.experiment}: {error.source}",
                error.problem,
                line=error.line,
                field=error.field,
            ) from None
        checked.add(check_key(run))


@dataclass
class _Keeper:
    """Takes each outcome as it arrives: refuses one of other code, caches a result (a
    cache that cannot be written is warned of once, and the study goes on)."""

    study: Study
    keys: list[str]
    code: str
    cache: ResultCache
    warn: Callable[[str], None]
    outcomes: dict[int, Outcome]
    on_done: Progress | None
    unkept: bool = False

    def done(self, i: int, doc: dict[str, Any] | None, error: str | None) -> None:
        run, key = self.study.runs[i], self.keys[i]
        if doc is not None and doc.get("code") != self.code:
            theirs, mine = str(doc.get("code"))[:12], self.code[:12]
            error = f"computed with other gpufleet code ({theirs}, here {mine}): install this "
            error += "gpufleet on the workers"
        if error is not None or doc is None:
            outcome = Outcome(i, run, key, None, error=error or "no result")
        else:
            timing = {k: v for k, v in doc.items() if k != "result"}
            try:
                self.cache.put(
                    key, {"run": describe(run), "result": doc["result"], "timing": timing}
                )
            except OSError as exc:  # a full disk, a file where a folder goes
                if not self.unkept:
                    self.warn(f"{self.cache.root}: cannot keep results there ({exc}); the study "
                              "goes on without caching them")  # fmt: skip
                self.unkept = True
            outcome = Outcome(i, run, key, doc["result"], timing=timing)
        self.outcomes[i] = outcome
        if self.on_done is not None:
            self.on_done(outcome)


def _refuse(constant: str) -> float:
    raise ValueError(f"{constant} is no result")


def _size(run: StudyRun, blobs: Blobs) -> tuple[int, bool, float]:
    """How long ``run`` may take, roughly: the bytes of its trace, a replay before a fill,
    the longer window first. The runs start largest first, so that the longest do not
    start last and leave the other workers idle at the end."""
    since, until = run.window
    span = math.inf if until is None else until - since
    return len(blobs[run.trace.digest][1]), run.protocol == "replay", span


def describe(run: StudyRun) -> dict[str, Any]:
    """What a run is, as the cache and the JSON report say it."""
    return {
        "experiment": run.experiment,
        "protocol": run.protocol,
        "trace": run.trace.name,
        "format": run.trace_format,
        "window": {"since": run.window[0], "until": run.window[1]},
        "cluster": None if run.cluster is None else run.cluster.name,
        "queues": None if run.queues is None else run.queues.name,
        "prices": None if run.prices is None else run.prices.name,
        "serving": None if run.serving is None else run.serving.name,
        "setting": run.setting_label(),
        "seed": run.seed,
    }
