"""The chart's tests run the real helm, taken from the kubectl wheel of the dev extra
(``tests/apiserver/kubectl.py``, ``chart.py``); without it (another platform) they are
skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.apiserver import kubectl
from tests.deploy import chart
from tests.deploy.chart import CHART, NAMESPACE, RELEASE

__all__ = ["CHART", "NAMESPACE", "RELEASE", "Render", "helm", "render"]

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """Run helm with its cache, config and data in a directory of the test session's."""
    why = kubectl.unavailable()
    if why:
        pytest.skip(why)
    return chart.helm(tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def render(helm: Callable[..., str]) -> Render:
    """``helm template`` of the chart with ``--set`` values, as the objects it renders."""
    return lambda *values: chart.render(helm, *values)
