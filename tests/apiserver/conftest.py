"""The emulator's fixtures, for the tests of this package (``fixtures.py``)."""

from tests.apiserver.fixtures import client, emulator

__all__ = ["client", "emulator"]
