"""Property 3: property-based fuzz (hypothesis) of every JSON endpoint of every family, and an auth
fuzz of every route. Complements ``tests/robustness`` (hand-made tables of bad values per field of
the text families) with generated bodies for all families, the media-task, audio, responses, admin
and account endpoints included.

* Body fuzz: a valid seed body per endpoint with a random JSON value put at a random place (or
  replaced whole), sent with a valid credential. No answer is a 5xx; every answer carries
  ``X-Service-Request-Id``; every error is JSON in the envelope its family renders.
* Auth fuzz: every route of the app (read from its route table) with crafted paths (``%2e``,
  ``//``, ``;``, encoded NUL and slashes), Host headers and credential values (in every place a
  family reads one: Bearer, ``x-api-key``, ``x-goog-api-key``, ``?key=``), none valid. No answer
  is a 2xx (except the public pages) and none a 5xx.

The gateway runs in a thread of its own (``threaded.py``) so that hypothesis drives plain functions.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route

from gateway.runtime.errors import GatewayError
from tests.hardening.threaded import ThreadedGateway, running

EXAMPLES = 60  # per endpoint; the whole module stays well under a minute
PROMPT = "sim:tokens=2 hi"
TEXT = [{"role": "user", "content": PROMPT}]
GEMINI = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
          "generationConfig": {"maxOutputTokens": 4}}
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
       "DwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

SEEDS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": "sim-chat", "messages": TEXT, "max_tokens": 4},
    "/v1/completions": {"model": "sim-chat", "prompt": PROMPT, "max_tokens": 4},
    "/v1/embeddings": {"model": "sim-embed", "input": "hello"},
    "/v1/messages": {"model": "sim-claude", "max_tokens": 4, "messages": TEXT},
    "/v1/messages/count_tokens": {"model": "sim-claude", "messages": TEXT},
    "/v1beta/models/sim-gemini:generateContent": GEMINI,
    "/v1beta/models/sim-gemini:streamGenerateContent?alt=sse": GEMINI,
    "/v1beta/models/sim-gemini:countTokens": GEMINI,
    "/v1beta/models/sim-gemini-embed:embedContent": {"content": {"parts": [{"text": "hello"}]}},
    "/v1beta/models/sim-gemini-embed:batchEmbedContents": {
        "requests": [{"model": "models/sim-gemini-embed", "content": {"parts": [{"text": "hello"}]}}]},
    "/v1/responses": {"model": "sim-chat", "input": PROMPT, "max_output_tokens": 4},
    "/v1/audio/speech": {"model": "sim-tts", "input": "hi", "voice": "alloy"},
    "/v1/images/generations": {"model": "sim-image", "prompt": "a cat", "response_format": "b64_json"},
    "/imagetask/submit/imagine": {"prompt": "a cat"},
    "/imagetask/submit/change": {"taskId": "1", "action": "UPSCALE", "index": 1},
    "/imagetask/submit/blend": {"base64Array": [PNG, PNG]},
    "/imagetask/submit/describe": {"base64": PNG},
    "/imagetask/submit/zoom": {"taskId": "1", "zoomRatio": 1.5},
    "/imagetask/submit/pan": {"taskId": "1", "direction": "LEFT"},
    "/imagetask/submit/modal": {"taskId": "1", "prompt": "x"},
    "/imagetask/task/list-by-condition": {"ids": ["1"]},
    "/videoa/v1/videos/generations": {"model": "videoa-2-0-mini",
                                      "input": {"prompt": "a cat", "duration": 5}},
    "/v1/videos": {"model": "videos-standard", "prompt": "a cat", "seconds": "4"},
    "/music/submit/music": {"prompt": "a song"},
    "/music/fetch": {"ids": ["1"]},
    "/admin/users": {"name": "n", "quota_usd": 1},
    "/admin/keys": {"user_id": 1, "name": "k"},
    "/api/keys": {"name": "k"},
}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: (st.lists(children, max_size=4)
                      | st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=12)


@pytest.fixture(scope="module")
def tgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedGateway]:
    with running(Path(tmp_path_factory.mktemp("fuzz")) / "gateway.db") as gateway:
        yield gateway


def _places(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        out += _places(value, (*prefix, key))
    return out


def _put(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def _shape(value: Any) -> Any:
    """Keys of nested objects, the structure an envelope is judged by (values differ)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items() if k not in ("param", "details", "properties")}
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return "number" if number else type(value).__name__


def _envelope_of(tgw: ThreadedGateway, path: str, status: int) -> Any:
    body = tgw.app.state.gateway.families.render_for_path(path.split("?")[0], GatewayError("m", status=status,
                                                                                          code="c"))
    return _shape(orjson.loads(body))


def _credential(path: str, tgw: ThreadedGateway) -> dict[str, str]:
    if path.startswith("/admin/"):
        return {"Authorization": "Bearer admin-hardening-key"}
    if path.startswith("/api/"):
        return {"Authorization": f"Bearer {tgw.user_token}"}
    return {"Authorization": f"Bearer {tgw.key}", "anthropic-version": "2023-06-01",
            "x-goog-api-key": tgw.key}


@pytest.mark.parametrize("path", list(SEEDS))
def test_body_fuzz(tgw: ThreadedGateway, path: str) -> None:
    seed = SEEDS[path]
    places = _places(seed)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        how = data.draw(st.sampled_from(["replace", "add", "whole", "stream"]))
        if how == "replace" and places:
            body = _put(seed, data.draw(st.sampled_from(places)), data.draw(JSON))
        elif how == "add":
            body = {**seed, data.draw(st.text(max_size=12)): data.draw(JSON)}
        elif how == "stream":
            body = {**seed, "stream": data.draw(st.booleans() | JSON)}
        else:
            body = data.draw(JSON)
        answer = tgw.call("POST", path, raw=json.dumps(body).encode(), headers=_credential(path, tgw))
        assert answer.status < 500, (path, body, answer.status, answer.body[:300])
        assert answer.headers.get("x-service-request-id", "").startswith("req_"), (path, body)
        if answer.status >= 400:
            assert _shape(answer.json()) == _envelope_of(tgw, path, answer.status), (path, body, answer.body)

    one()


# --- auth fuzz ------------------------------------------------------------------------------------

# Open by design: health and readiness, the Prometheus scrape (CONTRACT 6), the OpenAPI document and
# the console's page and assets (its API calls need a user token).
PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/console", "/console/",
          "/console/static/{name}"}
SEGMENT = (st.text(alphabet=string.ascii_letters + string.digits + "._-~", max_size=8)
           | st.sampled_from(["%2e", "%2e%2e", "..", ".", "%2f", "%00", ";a=b", "%252e", "//", "%5c", "admin",
                              "sim-chat", "1"]))
CREDENTIAL = st.text(alphabet=string.printable.strip() + " ", max_size=40).map(lambda s: s.replace("\r", ""))
HOSTS = st.sampled_from(["evil.example", "127.0.0.1", "localhost:1", "[::1]", "a" * 300, "x.example:99999"])


def _routes(tgw: ThreadedGateway) -> list[tuple[str, str]]:
    out = []
    for route in tgw.app.routes:
        if isinstance(route, Route) and route.path not in PUBLIC:
            out += [(method, route.path) for method in sorted(route.methods or ()) if method != "HEAD"]
    return out


def _fill(template: str, parts: list[str]) -> str:
    out, rest = [], template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        _, _, rest = tail.partition("}")
        out.append(head + (parts.pop() if parts else "x"))
    return "".join(out) + rest


def test_auth_fuzz(tgw: ThreadedGateway) -> None:
    routes = _routes(tgw)
    assert len(routes) > 40

    @settings(max_examples=600, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(route=st.sampled_from(routes), segments=st.lists(SEGMENT, min_size=3, max_size=3),
           suffix=st.sampled_from(["", "/", "//", "/%2e%2e/admin/users", ";x", "%00", "?a=1"]),
           where=st.sampled_from(["bearer", "x-api-key", "x-goog-api-key", "query", "basic", "none"]),
           credential=CREDENTIAL, host=HOSTS)
    def one(route: tuple[str, str], segments: list[str], suffix: str, where: str, credential: str,
            host: str) -> None:
        method, template = route
        path = _fill(template, segments) + suffix
        headers = {"Host": host, "Content-Type": "application/json"}
        if where == "bearer":
            headers["Authorization"] = f"Bearer {credential}"
        elif where == "basic":
            headers["Authorization"] = f"Basic {credential}"
        elif where in ("x-api-key", "x-goog-api-key"):
            headers[where] = credential
        elif where == "query":
            path += ("&" if "?" in path else "?") + "key=" + quote(credential)
        with_body = method in ("POST", "PATCH", "PUT")
        body = orjson.dumps(SEEDS.get(template, {"model": "sim-chat"})) if with_body else None
        answer = tgw.call(method, path, raw=body, headers=headers)
        assert answer.status < 500, (method, path, where, answer.status, answer.body[:200])
        assert not 200 <= answer.status < 300, (method, path, where, credential, answer.body[:200])

    one()
