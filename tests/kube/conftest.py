"""The API emulator's fixtures, for the live adapter's tests (``tests/apiserver/fixtures.py``)."""

from tests.apiserver.fixtures import client, emulator

__all__ = ["client", "emulator"]
