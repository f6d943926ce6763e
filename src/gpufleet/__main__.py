"""``python -m gpufleet``."""

from gpufleet.cli.app import main

main()
