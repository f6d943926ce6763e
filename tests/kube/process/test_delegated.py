"""The decisions of ``kube/process/delegated.py`` against a scripted API server: reviews are cached
for their TTL and no longer, the cache is bounded whatever the tokens, and a reply that is
not a review is a refusal, never a grant."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from gpufleet.kube.process.delegated import TOKEN_REVIEWS, Delegated, Verdict

JSON = dict[str, Any]


class Api:
    """Answers reviews: ``good`` tokens are user ``alice``, who may get ``/metrics``."""

    def __init__(self, *, token_reply: JSON | None = None) -> None:
        self.calls: list[tuple[str, JSON]] = []
        self.token_reply = token_reply

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.calls.append((request.url.path, body["spec"]))
        if request.url.path == TOKEN_REVIEWS:
            if self.token_reply is not None:
                return httpx.Response(201, json=self.token_reply)
            good = body["spec"]["token"].startswith("good")
            user = {"username": "alice", "groups": ["team"], "extra": {"scopes": ["a"]}}
            return httpx.Response(201, json={"status": {"authenticated": good, "user": user}})
        attributes = body["spec"]["nonResourceAttributes"]
        allowed = body["spec"]["user"] == "alice" and attributes == {
            "path": "/metrics",
            "verb": "get",
        }
        return httpx.Response(201, json={"status": {"allowed": allowed}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def decide(guard: Delegated, path: str, token: str | None, method: str = "GET") -> Verdict:
    header = f"Bearer {token}" if token is not None else None
    return asyncio.run(guard.decide(method, path, header))


def client(api: Api) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(api), base_url="https://api")


def test_reviews_are_cached_for_their_ttl_and_made_again_after() -> None:
    api, clock = Api(), Clock()
    guard = Delegated(client(api), ttl=10.0, clock=clock)
    assert decide(guard, "/metrics", "good-1").status == 200
    assert decide(guard, "/metrics", "good-1").status == 200
    assert len(api.calls) == 2  # one TokenReview, one SubjectAccessReview
    clock.now = 10.5
    assert decide(guard, "/metrics", "good-1").status == 200
    assert len(api.calls) == 4
    spec = api.calls[-1][1]
    assert spec == {
        "user": "alice",
        "groups": ["team"],
        "extra": {"scopes": ["a"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


def test_the_cache_is_bounded_whatever_the_tokens() -> None:
    api = Api()
    guard = Delegated(client(api), size=8)
    for i in range(100):
        assert decide(guard, "/metrics", f"forged-{i}").status == 401
    assert len(guard.users.entries) == 8


def test_probes_need_no_credentials_and_other_paths_do() -> None:
    api = Api()
    guard = Delegated(client(api), ("/healthz", "/debug/*"))
    assert decide(guard, "/healthz", None).status == 200
    assert decide(guard, "/debug/pprof", None).status == 200
    assert decide(guard, "/readyz", None) == Verdict(401, "Unauthorized")
    assert decide(guard, "/metrics", "") == Verdict(401, "Unauthorized")
    assert api.calls == []


def test_the_verb_is_the_method_in_lower_case_as_apiserver_derives_it() -> None:
    guard = Delegated(client(Api()))
    assert decide(guard, "/metrics", "good", "GET").status == 200
    for method in ("HEAD", "POST"):
        verdict = decide(guard, "/metrics", "good", method)
        assert verdict == Verdict(
            403, f'Forbidden: User "alice" cannot {method.lower()} path "/metrics"'
        )


def test_a_reply_that_is_not_a_review_refuses() -> None:
    for reply in ({"status": "yes"}, {"status": {"authenticated": "true"}}, {"kind": "Status"}):
        guard = Delegated(client(Api(token_reply=reply)))
        assert decide(guard, "/metrics", "good").status == 401, reply
    unnamed = {"status": {"authenticated": True, "user": {"groups": ["system:masters"]}}}
    assert decide(Delegated(client(Api(token_reply=unnamed))), "/metrics", "good").status == 401


def test_reviews_beyond_the_slots_are_429_and_one_token_is_reviewed_once() -> None:
    """A flood of scrapes: at most ``in_flight`` reviews are under way, the rest answered
    429 at once; requests with one token wait on the one review of it."""
    api = Api()

    async def main() -> tuple[list[int], list[int], int]:
        gate = asyncio.Event()

        async def slow(request: httpx.Request) -> httpx.Response:
            await gate.wait()
            return api(request)

        http = httpx.AsyncClient(transport=httpx.MockTransport(slow), base_url="https://api")
        guard = Delegated(http, in_flight=2)

        async def scrape(token: str) -> int:
            return (await guard.decide("GET", "/metrics", f"Bearer {token}")).status

        same = [asyncio.create_task(scrape("good")) for _ in range(10)]
        await asyncio.sleep(0.01)
        others = [asyncio.create_task(scrape(f"good-{i}")) for i in range(10)]
        await asyncio.sleep(0.01)
        gate.set()
        return await asyncio.gather(*same), await asyncio.gather(*others), len(api.calls)

    same, others, calls = asyncio.run(main())
    assert same == [200] * 10
    assert sorted(others) == [200] + [429] * 9  # one slot was left beside the shared one
    assert calls == 3  # two TokenReviews, one SubjectAccessReview (both tokens are alice)
