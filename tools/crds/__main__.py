"""``python -m tools.crds --write DIR``: :func:`tools.crds.chart.main`."""

from tools.crds.chart import main

main()
