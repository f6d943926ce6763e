"""The ServeGen serving-load reader: a model's load is its clients' rates summed per window,
a window every client reads 0 is a gap carried forward, replicas follow the rate, and every
bad row is one error naming its file, line and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.traces.servegen import MAX_WINDOWS, load_model

ROW = "{start},{rate},1.5,Gamma,0.5,2.0\n"


def model(tmp_path: Path, *clients: dict[int, float], name: str = "m-test") -> Path:
    """A model folder with one chunk file per client: window start (s) -> rate."""
    folder = tmp_path / name
    folder.mkdir()
    for i, rates in enumerate(clients):
        rows = "".join(ROW.format(start=s, rate=r) for s, r in rates.items())
        (folder / f"chunk-{i}-trace.csv").write_text(rows)
    return folder


def test_clients_are_summed_per_window_and_gaps_carry_the_load_forward(tmp_path: Path) -> None:
    folder = model(
        tmp_path,
        {0: 0, 600: 2.0, 1200: 0, 1800: 1.0, 3000: 0.5},
        {0: 0, 600: 1.0, 1200: 0, 1800: 0.5},
    )
    load = load_model(folder)
    # window 0: a leading gap takes the first load measured; 1200 and 2400 (no file lists
    # it) are gaps holding the window before them
    assert load.rate.tolist() == [3.0, 3.0, 3.0, 1.5, 1.5, 0.5]
    assert (load.model, load.window_s, load.clients, load.gaps) == ("m-test", 600.0, 2, 3)


def test_a_window_only_some_clients_read_zero_is_load_not_a_gap(tmp_path: Path) -> None:
    load = load_model(model(tmp_path, {0: 4.0, 600: 0.0}, {0: 1.0, 600: 1.0}))
    assert load.rate.tolist() == [5.0, 1.0]
    assert load.gaps == 0


def test_replicas_follow_the_rate_and_the_peak_needs_the_pool(tmp_path: Path) -> None:
    load = load_model(model(tmp_path, {0: 10.0, 600: 5.0, 1200: 2.5, 1800: 40.0}))
    assert load.replicas(8).tolist() == [2, 1, 1, 8]  # mu = 40 * 1.2 / 8 = 6 requests/s
    assert load.replicas(8, mu=3.0, headroom=1.5).tolist() == [5, 3, 2, 20]
    with pytest.raises(ValueError, match="mu"):
        load.replicas(8, mu=0.0)
    with pytest.raises(ValueError, match="more than"):
        load.replicas(8, mu=1e-300)  # no silent wrap past the largest integer
    with pytest.raises(ValueError, match="whole number"):
        load.replicas(2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        pytest.param("0,fast,1,Gamma,1,1\n", "rate", "non-negative number", id="word"),
        pytest.param("0,-1,1,Gamma,1,1\n", "rate", "non-negative number", id="negative"),
        pytest.param("0,nan,1,Gamma,1,1\n", "rate", "non-negative number", id="nan"),
        pytest.param("0,inf,1,Gamma,1,1\n", "rate", "non-negative number", id="infinite"),
        pytest.param("0,1e308,1,Gamma,1,1\n", "rate", "at most", id="overflowing"),
        pytest.param("0,1,x,Gamma,1,1\n", "cv", "non-negative number", id="bad-cv"),
        pytest.param("0,1,1,Gamma,1\n", "scale", "non-negative number", id="five-columns"),
        pytest.param("0\n", "rate", "non-negative number", id="short-row"),
        pytest.param("300,1,1,Gamma,1,1\n", "start", "multiple of 600", id="inside-a-window"),
        pytest.param("0,1,1,Gamma,1,1\n0,2,1,Gamma,1,1\n", "start", "twice", id="duplicate"),
        pytest.param(
            f"{MAX_WINDOWS * 600},1,1,Gamma,1,1\n", "start", "multiple of 600", id="too-late"
        ),
    ],
)
def test_a_bad_row_is_an_error_naming_file_line_and_field(
    tmp_path: Path, body: str, field: str, words: str
) -> None:
    folder = tmp_path / "m-bad"
    folder.mkdir()
    (folder / "chunk-0-trace.csv").write_text(body)
    with pytest.raises(InputError) as raised:
        load_model(folder)
    text = str(raised.value)
    assert "chunk-0-trace.csv" in text
    assert field in text
    assert words in text


def test_extra_columns_and_files_that_are_no_csv_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "m-bad"
    folder.mkdir()
    (folder / "chunk-0-trace.csv").write_text("0,1,1,Gamma,1,1,surprise\n")
    with pytest.raises(InputError, match="more than the 6 columns"):
        load_model(folder)
    (folder / "chunk-0-trace.csv").write_bytes(b"\xff\xfe0,1\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_model(folder)


def test_two_files_of_one_client_and_a_load_without_requests_are_refused(
    tmp_path: Path,
) -> None:
    folder = model(tmp_path, {0: 1.0})
    (folder / "chunk-00-trace.csv").write_text(ROW.format(start=0, rate=1.0))
    with pytest.raises(InputError, match="two files for client 0"):
        load_model(folder)
    with pytest.raises(InputError, match="every client reads 0"):
        load_model(model(tmp_path, {0: 0.0, 600: 0.0}, name="m-idle"))


def test_a_folder_without_client_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a directory"):
        load_model(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no chunk-<n>-trace\.csv files"):
        load_model(tmp_path / "empty")


def test_the_shared_language_models_read_whole() -> None:
    root = Path(__file__).resolve().parents[4] / "shared" / "traces" / "servegen" / "language"
    if not root.is_dir():
        pytest.skip("the shared ServeGen traces are not next to this checkout")
    large = load_model(root / "m-large")
    assert (large.clients, large.rate.size, large.gaps) == (162, 14 * 144, 0)
    mid = load_model(root / "m-mid")
    assert mid.gaps > 0
    assert np.all(mid.rate > 0)  # every gap carried
    assert large.replicas(64).max() == 64


def test_mu_scaled_from_the_pool_s_own_sizes_the_replicas(tmp_path: Path) -> None:
    load = load_model(model(tmp_path, {0: 1.0, 600: 4.0, 1200: 8.0}))
    assert load.sized(4).tolist() == load.replicas(4).tolist() == [1, 2, 4]
    # each replica serving twice as much: the peak needs half the pool
    assert load.sized(4, 2.0).tolist() == [1, 1, 2]
