"""No input, however bad, yields a 500 or a stack trace (CONTRACT section 5), over real HTTP.

Every endpoint gets a table of malformed requests, built programmatically: bodies that are no JSON
object at all (empty, not JSON, an array, invalid UTF-8, 10000 levels deep...), each important
field of a valid body replaced by a wrong type or an out-of-range value (2**70 included), odd
models in the path, wrong methods, content types and credentials, the streaming variants, and a
seeded random mutator over a rich valid body of each family. Each answer must

* be below 500 (no case here makes an upstream truly fail), or exactly what the case expects;
* carry ``X-Service-Request-Id``;
* when an error, be JSON in the envelope of the endpoint's family, with the native type/status of
  its HTTP status, a message and a snake_case code;
* hold no stack trace nor internal names;
* when a stream that started, carry no in-band error (the simulator never fails here).

And nothing may be logged at ERROR, or with a stack trace, by the gateway or the server meanwhile:
that is also how an exception inside a stream that already started (which can no longer reach the
client) is caught.

Generation cases run against a model of each upstream protocol, so that both the fast path (the
client's bytes forwarded) and the translated path (full decode, re-encode) see every body, and
again on aliased models (the fast path then rewrites the client's bytes). Each test starts one
gateway and sends its cases concurrently.

Bugs outside the translators are reported rather than fixed here: ``KNOWN_CORE_BUGS`` recognises
each by the stack trace the server logged for the request (or, for the simulator, by the answer).
A test whose only problems are known core bugs is an xfail naming them; anything else fails. Once
a core bug is fixed its cases simply pass (and its entry can go).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import random
import re
import traceback
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yarl

from gateway_simulator.textgen import signature_for
from translators.v1beta.simulator import thought_signature

ADMIN_KEY = "admin-test-key"  # the admin key of the test config (tests/conftest.py)
REQUEST_ID = "X-Service-Request-Id"
BIG = 2**70
PROMPT = "sim:tokens=3 hello"
CONCURRENCY = 24
SHOWN = 60  # problems listed in a failure message
SIGNATURE = thought_signature()  # the simulated upstream refuses a signature it did not issue


class RawJSON(bytes):
    """Bytes spliced into a body as they are: what ``json.dumps`` cannot write (NaN, 1e400, 10000
    levels of nesting, a string of invalid UTF-8)."""


DELETE: Any = object()  # a mutation that removes the field
DEEP_ARRAY = RawJSON(b"[" * 10_000 + b"]" * 10_000)
DEEP_OBJECT = RawJSON(b'{"a":' * 10_000 + b"1" + b"}" * 10_000)
BAD_UTF8 = RawJSON(b'"caf\xe9 \xff\xfe"')  # latin-1 bytes in a JSON string
HUGE_FLOAT = RawJSON(b"1e400")  # valid JSON, beyond a double
LONE_SURROGATE = "\ud800"  # valid JSON text ("\ud800"), but no valid Unicode string


def dumps(value: Any) -> bytes:
    """JSON of ``value`` with ``RawJSON`` spliced in; big integers and lone surrogates written as
    JSON allows them (stdlib ``json``, ASCII-escaped)."""
    if isinstance(value, RawJSON):
        return bytes(value)
    if isinstance(value, dict):
        return b"{" + b",".join(json.dumps(k).encode() + b":" + dumps(v) for k, v in value.items()) + b"}"
    if isinstance(value, list | tuple):
        return b"[" + b",".join(dumps(v) for v in value) + b"]"
    return json.dumps(value).encode()


def short(value: Any) -> str:
    text = "<deleted>" if value is DELETE else repr(value)
    return text if len(text) <= 48 else text[:45] + "..."


# --- cases and how an answer is judged ----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str  # percent-encoded, sent as is (no normalisation of ``..``)
    family: str  # chat | messages | v1beta: the envelope an error must come in
    auth: str  # chat | messages | v1beta | user | admin | none: the credential headers to add
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str | None = "application/json"  # None: no Content-Type header at all
    expect: frozenset[int] | None = None  # the statuses allowed when the case is unambiguous
    chunked: bool = False  # sent with Transfer-Encoding: chunked (no Content-Length)


def status_set(*statuses: int) -> frozenset[int]:
    return frozenset(statuses)


BAD_REQUEST = status_set(400)
NOT_ALLOWED = status_set(404, 405)
UNAUTHORIZED = status_set(401)

NATIVE_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
               429: "rate_limit_error"}
NATIVE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT",
                 429: "RESOURCE_EXHAUSTED"}
SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")
# A stack trace, an exception repr, or a module/type name of the implementation.
LEAK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]*\", line \d+|\b\w*(?:Error|Exception)\("
                  r"|<class '|<built-in|site-packages|\b(?:msgspec|orjson|starlette|aiohttp|hypercorn)\.\w"
                  r"|\bgateway\.\w+\.\w|\btranslators\.\w")
# What a stream that failed half-way says in-band (the simulator never fails here).
IN_BAND_ERROR = re.compile(r'"(?:upstream_error|internal_error|api_error|INTERNAL|UNAVAILABLE)"')
SERVER_LOGGERS = ("gateway", "translators", "plugins", "hypercorn", "asyncio")


def native_type(status: int) -> str:
    return "api_error" if status >= 500 else NATIVE_TYPE.get(status, "invalid_request_error")


def native_statuses(status: int) -> tuple[str, ...]:
    if status >= 500:
        return ("INTERNAL", "UNAVAILABLE")
    return (NATIVE_STATUS.get(status, "INVALID_ARGUMENT"),)


def envelope_problem(family: str, status: int, data: Any) -> str | None:
    """What is wrong with an error body ``data`` of ``status`` in ``family``'s envelope, if anything."""
    if family == "messages":
        if not isinstance(data, dict) or data.get("type") != "error" or not isinstance(
                data.get("error"), dict):
            return "not the message-protocol envelope"
        inner = data["error"]
        if inner.get("type") != native_type(status):
            return f"error.type {inner.get('type')!r} does not match HTTP {status}"
        code = inner.get("code")
    elif family == "v1beta":
        inner = data.get("error") if isinstance(data, dict) else None
        if not isinstance(inner, dict):
            return "not the v1beta envelope"
        if inner.get("code") != status or inner.get("status") not in native_statuses(status):
            return (f"error.code/status {inner.get('code')!r}/{inner.get('status')!r} do not match "
                    f"HTTP {status}")
        details = inner.get("details")
        code = details[0].get("reason") if isinstance(details, list) and details and isinstance(
            details[0], dict) else None
    else:
        inner = data.get("error") if isinstance(data, dict) else None
        if not isinstance(inner, dict):
            return "not the chat envelope"
        if inner.get("type") != native_type(status):
            return f"error.type {inner.get('type')!r} does not match HTTP {status}"
        code = inner.get("code")
    if not isinstance(inner.get("message"), str) or not inner["message"].strip():
        return "the error has no message"
    if not isinstance(code, str) or not SNAKE_CASE.fullmatch(code):
        return f"the error code {code!r} is not snake_case"
    return None


def judge(case: Case, status: int, headers: Any, body: bytes) -> list[str]:
    """Every rule an answer breaks (empty when it is fine)."""
    problems: list[str] = []
    if not headers.get(REQUEST_ID, "").startswith("req_"):
        problems.append(f"no {REQUEST_ID} header")
    if status >= 500:
        problems.append(f"HTTP {status}")
    elif case.expect is not None and status not in case.expect:
        problems.append(f"HTTP {status}, expected {'/'.join(map(str, sorted(case.expect)))}")
    text = body.decode("utf-8", "replace")
    leak = LEAK.search(text)
    if leak:
        problems.append(f"internals in the body ({leak.group(0)!r})")
    if case.method == "HEAD" or status == 204:
        return _with_body(problems, body)
    content_type = headers.get("Content-Type", "")
    if status >= 400:
        try:
            data = json.loads(body)
        except ValueError:
            return _with_body([*problems, "the error body is not JSON"], body)
        problem = envelope_problem(case.family, status, data)
        if problem:
            problems.append(problem)
    elif "event-stream" in content_type:
        if IN_BAND_ERROR.search(text):
            problems.append("the stream carries an error event")
    else:
        try:
            json.loads(body)
        except ValueError:
            problems.append(f"the {status} body is not JSON")
        if IN_BAND_ERROR.search(text):  # a v1beta stream sent as a JSON array
            problems.append("the answer carries an error object")
    return _with_body(problems, body)


def _with_body(problems: list[str], body: bytes) -> list[str]:
    if problems:
        problems[-1] += f": {body[:240]!r}"
    return problems


def auth_headers(gw: Any, auth: str) -> dict[str, str]:
    if auth == "chat":
        return {"Authorization": f"Bearer {gw.key}"}
    if auth == "messages":
        return {"x-api-key": gw.key, "anthropic-version": "2023-06-01"}
    if auth == "v1beta":
        return {"x-goog-api-key": gw.key}
    if auth == "user":
        return {"Authorization": f"Bearer {gw.user_token}"}
    if auth == "admin":
        return {"Authorization": f"Bearer {ADMIN_KEY}"}
    return {}


async def send(gw: Any, case: Case) -> tuple[int, Any, bytes]:
    headers = auth_headers(gw, case.auth)
    if case.content_type is not None:
        headers["Content-Type"] = case.content_type
    headers.update(case.headers)
    skip = ("Content-Type",) if case.content_type is None else ()
    url = yarl.URL(gw.base_url + case.path, encoded=True)
    data: Any = chunks(case.body) if case.chunked and case.body is not None else case.body
    async with gw.http.request(case.method, url, data=data, headers=headers, skip_auto_headers=skip) as resp:
        return resp.status, resp.headers, await resp.read()


async def chunks(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


@dataclass(frozen=True)
class CoreBug:
    """A known bug outside the translators (reported, not fixed here): a 500 whose server-side
    stack trace is an ``exc`` raised in ``where`` (``path:function`` of the innermost frame, or of
    any frame when ``anywhere``); or, with ``exc`` None, a ``status`` answer whose body holds
    ``marker``."""

    id: str
    summary: str
    where: str
    exc: type[BaseException] | None = None
    anywhere: bool = False
    status: int = 500
    marker: bytes = b""

    def matches(self, status: int, body: bytes, trace: tuple[type[BaseException], list[str]] | None) -> bool:
        if status != self.status:
            return False
        if self.exc is None:
            return self.marker in body
        if trace is None or not issubclass(trace[0], self.exc) or not trace[1]:
            return False
        return any(self.where in f for f in trace[1]) if self.anywhere else self.where in trace[1][-1]


# Remove an entry once its bug is fixed: its cases then have to pass like any other.
KNOWN_CORE_BUGS: tuple[CoreBug, ...] = ()  # none known: add an entry to xfail a newly found one


_REQUEST_ID_IN_TEXT = re.compile(r"req_[0-9a-f]{32}")


def server_traces(caplog: pytest.LogCaptureFixture) -> dict[str, tuple[type[BaseException], list[str]]]:
    """Request id -> (exception type, ``path:function`` of every frame, innermost last) of the
    stack traces the server logged."""
    traces = {}
    for record in caplog.records:
        if record.exc_info and record.exc_info[0] is not None:
            for rid in _REQUEST_ID_IN_TEXT.findall(record.getMessage()):
                frames = [f"{f.filename}:{f.name}" for f in traceback.extract_tb(record.exc_info[2])]
                traces[rid] = (record.exc_info[0], frames)
    return traces


def server_log_problems(caplog: pytest.LogCaptureFixture, known_ids: set[str]) -> list[str]:
    """ERROR records, or any record with a stack trace, of the gateway and the server (but those
    of requests already put down to a known core bug)."""
    found = []
    for record in caplog.records:
        if record.name.startswith(SERVER_LOGGERS) and (record.levelno >= logging.ERROR or record.exc_info):
            message = record.getMessage()
            if known_ids.intersection(_REQUEST_ID_IN_TEXT.findall(message)):
                continue
            trace = " (with a stack trace)" if record.exc_info else ""
            found.append(f"server log {record.name} {record.levelname}{trace}: {message[:300]}")
    return found


async def run_cases(gw: Any, cases: list[Case], caplog: pytest.LogCaptureFixture) -> None:
    """Send every case (concurrently); fail with the list of everything that went wrong, or xfail
    when all that went wrong is a known core bug."""
    assert cases
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    caplog.set_level(logging.WARNING)
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(case: Case) -> tuple[Case, int, Any, bytes] | str:
        async with limit:
            try:
                return (case, *await send(gw, case))
            except (aiohttp.ClientError, TimeoutError) as exc:
                return f"{case.name}: no answer ({type(exc).__name__}: {exc})"

    answers = await asyncio.gather(*map(one, cases))
    traces = server_traces(caplog)
    problems: list[str] = []
    known: dict[str, list[str]] = {}
    known_ids: set[str] = set()
    for answer in answers:
        if isinstance(answer, str):
            problems.append(answer)
            continue
        case, status, headers, body = answer
        found = judge(case, status, headers, body)
        if not found:
            continue
        rid = headers.get(REQUEST_ID, "")
        bug = next((b for b in KNOWN_CORE_BUGS if b.matches(status, body, traces.get(rid))), None)
        if bug is not None and len(found) == 1:
            known.setdefault(bug.id, []).append(case.name)
            known_ids.add(rid)
        else:
            problems += [f"{case.name} [{case.method} {case.path[:120]}]: {p}" for p in found]
    problems += server_log_problems(caplog, known_ids)
    assert not problems, f"{len(problems)} problem(s) in {len(cases)} cases:\n" + "\n".join(problems[:SHOWN])
    if known:
        pytest.xfail("known core bugs: " + "; ".join(
            f"{bug} in {len(names)} case(s), e.g. {names[0]}" for bug, names in sorted(known.items())))


async def fund(gw: Any) -> None:
    """Enough balance that no valid call is refused for quota (worst cases add up concurrently)."""
    reply = await gw.admin("POST", f"/admin/users/{gw.user['id']}/topup", {"amount_usd": 1_000_000})
    assert reply.status == 200, reply.text


# --- the generation and embedding endpoints -------------------------------------------------------


def chat_body(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8}


def completion_body(model: str) -> dict[str, Any]:
    return {"model": model, "prompt": PROMPT, "max_tokens": 8}


def embeddings_body(model: str) -> dict[str, Any]:
    return {"model": model, "input": "hello"}


def messages_body(model: str) -> dict[str, Any]:
    return {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": PROMPT}]}


def generate_body(model: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
            "generationConfig": {"maxOutputTokens": 8}}


def embed_body(model: str) -> dict[str, Any]:
    return {"content": {"parts": [{"text": "hello"}]}}


def batch_embed_body(model: str) -> dict[str, Any]:
    return {"requests": [{"model": f"models/{model}", "content": {"parts": [{"text": "hello"}]}}]}


@dataclass(frozen=True)
class Variant:
    """One way to call an endpoint: its path for a model, and what the body adds (``stream``)."""

    label: str
    path: Callable[[str], str]
    patch: tuple[tuple[str, Any], ...] = ()


def fixed(path: str) -> Callable[[str], str]:
    return lambda model: path


def model_method(prefix: str, method: str) -> Callable[[str], str]:
    return lambda model: f"{prefix}/models/{model}:{method}"


@dataclass(frozen=True)
class Endpoint:
    name: str
    family: str
    models: tuple[str, ...]  # the same-format model first, then models of other protocols
    body: Callable[[str], dict[str, Any]]
    variants: tuple[Variant, ...]
    fields: dict[tuple[Any, ...], list[Any]]  # path in the body -> bad values (DELETE removes it)

    def request_body(self, model: str, variant: Variant, doc: dict[str, Any] | None = None) -> dict[str, Any]:
        doc = copy.deepcopy(self.body(model) if doc is None else doc)
        doc.update(variant.patch)
        return doc


# Field tables. A value is put at the path of a valid body (all other fields stay valid).

COMMON_MODEL_VALUES = [123, None, "", [], {}, True, "no-such-model", "sim-chat\x00", "../../etc/passwd",
                       "m" * 5000, LONE_SURROGATE, BAD_UTF8, DELETE]
BIG_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": -BIG, "maximum": BIG}}}

CHAT_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("model",): COMMON_MODEL_VALUES,
    ("messages",): [
        {}, "hello", [], None, [1], ["x"], [{}], [[]], DELETE,
        [{"role": "robot", "content": "x"}],
        [{"role": "user"}],
        [{"role": 5, "content": "x"}],
        [{"role": "assistant", "content": "only the assistant"}],
        [{"role": "system", "content": "only a system prompt"}],
        [{"role": "developer", "content": []}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        [{"role": "assistant", "content": None}],
        [{"role": "tool", "content": "no call id"}],
        [{"role": "tool", "tool_call_id": "call_x", "content": "an orphan result"}],
        [{"role": "user", "content": "hi"},
         {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                               "function": {"name": "f", "arguments": "{not json"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        [{"role": "user", "content": "hi"},
         {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "[1]"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "r"}]}],
        [{"role": "assistant", "tool_calls": "x"}],
        [{"role": "assistant", "tool_calls": [{"id": 5, "function": {}}]}],
        [{"role": "user", "content": "x"},
         {"role": "assistant", "content": [{"type": "refusal", "refusal": 5}]}],
    ],
    ("messages", 0, "role"): ["robot", 5, None, "", "USER", DELETE],
    ("messages", 0, "content"): [
        5, None, {}, [], [5], "", LONE_SURROGATE, ["text"], [{"type": "bogus"}], [{"type": "text"}],
        [{"type": "text", "text": 5}], [{"text": "no type"}], [{"type": "refusal", "refusal": "x"}],
        [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@not base64@@"}}],
        [{"type": "image_url", "image_url": {"url": "data:image/png,no-base64-flag"}}],
        [{"type": "image_url", "image_url": {"url": "data:;base64,"}}],
        [{"type": "image_url", "image_url": {"url": "ftp://example.com/x.png"}}],
        [{"type": "image_url", "image_url": {"url": ""}}],
        [{"type": "image_url", "image_url": {"url": "http://[::1"}}],
        [{"type": "image_url", "image_url": {"url": 5}}],
        [{"type": "image_url", "image_url": {"url": "https://example.com/x.png", "detail": 5}}],
        [{"type": "image_url", "image_url": "https://example.com/x.png"}],
        [{"type": "image_url"}],
        [{"type": "input_audio", "input_audio": {"data": "!!", "format": "wav"}}],
        [{"type": "file", "file": {}}],
        [{"type": "file", "file": {"file_id": "file-x"}}],
        [{"type": "file", "file": {"file_data": "data:;base64,"}}],
        [{"type": "file", "file": {"file_data": "%%%", "filename": 5}}],
        BAD_UTF8, [{"type": "text", "text": BAD_UTF8}],
    ],
    ("messages", 0, "name"): [5, {}],
    ("max_tokens",): [-1, 0, 1.5, "10", BIG, 2**63, 2**64, True, None, HUGE_FLOAT, RawJSON(b"NaN")],
    ("max_completion_tokens",): [0, -5, BIG, "x"],
    ("temperature",): [5, -1, "hot", BIG, RawJSON(b"1e999"), []],
    ("top_p",): [2, -0.1, "x"],
    ("stream",): ["yes", 1, [], {}],
    ("n",): [0, -1, BIG, "2", 129, 1.5, 2],
    ("stop",): [{}, 5, [1], [None], ["a"] * 100, ""],
    ("tools",): [
        "search", [1], {}, [], [{"type": "function"}], [{"type": "function", "function": {"name": 5}}],
        [{"type": "function", "function": {}}],
        [{"type": "function", "function": {"name": "f", "parameters": "not an object"}}],
        [{"type": "function", "function": {"name": ""}}], [{"type": "code_interpreter"}],
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 5}}}],
        [{"type": "function", "function": {"name": "f", "parameters": BIG_SCHEMA}}],
        [{"type": "function", "function": {"name": BAD_UTF8}}],
    ],
    ("tool_choice",): ["garbage", 5, {}, {"type": "function"},
                       {"type": "function", "function": {"name": "nope"}}, [], "required", "none"],
    ("response_format",): ["json", 5, {"type": "bad"}, {"type": "json_schema"},
                           {"type": "json_schema", "json_schema": {"schema": 5}},
                           {"type": "json_schema",
                            "json_schema": {"name": "x", "schema": {"type": "object"}}},
                           {"type": "json_schema", "json_schema": {"name": "x", "schema": BIG_SCHEMA}}],
    ("stream_options",): ["x", {"include_usage": "yes"}, {"include_usage": True}],
    ("reasoning_effort",): [5, "", "ultra", "none"],
    ("metadata",): [[1], {"a": 1}, "x"],
    ("seed",): [BIG, "x", -1],
    ("logprobs",): ["x"],
    ("top_logprobs",): [100, -1],
    ("user",): [5],
    ("presence_penalty",): [10, "x"],
    ("parallel_tool_calls",): ["x"],
    ("logit_bias",): [{"50256": -100}, "x"],
    ("x_unknown",): [DEEP_ARRAY, DEEP_OBJECT, LONE_SURROGATE, BIG, BAD_UTF8, [BAD_UTF8], HUGE_FLOAT],
}

COMPLETION_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("model",): COMMON_MODEL_VALUES,
    ("prompt",): [5, None, [], [1, 2], [[1, 2]], [1.5], {}, ["a", "b"], [None], "", LONE_SURROGATE, [BIG],
                  [[]], DELETE],
    ("max_tokens",): [-1, 0, BIG, "16", 1.5],
    ("echo",): ["yes", True],
    ("best_of",): [0, BIG, 100, 2],
    ("logprobs",): [10, "x", BIG],
    ("suffix",): [5],
    ("n",): [0, BIG],
    ("stream",): ["yes"],
    ("stop",): [{}, [1]],
    ("temperature",): [9],
    ("stream_options",): ["x"],
    ("logit_bias",): ["x"],
    ("x_unknown",): [DEEP_ARRAY, LONE_SURROGATE, BAD_UTF8, HUGE_FLOAT],
}

EMBEDDINGS_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("model",): [*COMMON_MODEL_VALUES, "sim-claude"],
    ("input",): [5, None, [], [""], "", [1, "a"], [[1], [2, "x"]], [-1], [BIG], [[BIG]], {}, [True], [[]],
                 ["x"] * 2049, LONE_SURROGATE, [1.5], [1, 2, 3], DELETE],
    ("encoding_format",): ["hex", 5, None, "base64"],
    ("dimensions",): [0, -5, BIG, "10", 1.5, 3],
    ("user",): [5],
    ("x_unknown",): [DEEP_OBJECT, BAD_UTF8],
}

MESSAGES_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("model",): [*COMMON_MODEL_VALUES, "  "],
    ("max_tokens",): [-1, 0, 1.5, "10", BIG, 2**63, True, None, DELETE],
    ("messages",): [
        {}, [], "x", None, DELETE, [1], [{}], [{"role": "robot", "content": "x"}], [{"role": "user"}],
        [{"role": "user", "content": 5}], [{"role": "assistant", "content": "x"}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        [{"role": "user", "content": []}],
        [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}],
        [{"role": "user", "content": "x"},
         {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}],
        [{"role": "user", "content": "x"},
         {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}],
        [{"role": "user", "content": "x"},
         {"role": "assistant",
          "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": BIG}}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}],
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "r"}]}],
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!!"}}]}]}],
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "document",
             "source": {"type": "base64", "media_type": "application/pdf", "data": "AA"}}]}]}],
        [{"role": "user", "content": "x"},
         {"role": "assistant", "content": [{"type": "thinking", "thinking": "h"}]},
         {"role": "user", "content": "y"}],
        [{"role": "user", "content": "x"},
         {"role": "assistant", "content": [{"type": "redacted_thinking", "data": 5}]},
         {"role": "user", "content": "y"}],
    ],
    ("messages", 0, "role"): ["robot", 5, None, "assistant", DELETE],
    ("messages", 0, "content"): [
        5, None, {}, [5], "", LONE_SURROGATE, [{"type": "bogus"}], [{"type": "text"}],
        [{"type": "text", "text": 5}], [{"text": "no type"}],
        [{"type": "image",
          "source": {"type": "base64", "media_type": "image/png", "data": "!!not base64!!"}}],
        [{"type": "image", "source": {"type": "base64", "media_type": "text/html", "data": ""}}],
        [{"type": "image", "source": {"type": "base64"}}],
        [{"type": "image", "source": {"type": "url", "url": "not a url"}}],
        [{"type": "image", "source": {"type": "url", "url": "javascript:alert(1)"}}],
        [{"type": "image", "source": {"type": "file", "file_id": "f"}}],
        [{"type": "image", "source": 5}],
        [{"type": "image", "source": {"type": "bogus"}}],
        [{"type": "image"}],
        [{"type": "document", "source": {"type": "text", "data": 5}}],
        [{"type": "document", "source": {"type": "content", "content": [5]}}],
        [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "%%%"}}],
        [{"type": "document", "source": {"type": "url", "url": ""}}],
        [{"type": "document", "source": {"type": "file", "file_id": "f"}}],
        [{"type": "text", "text": "x", "cache_control": "x"}],
        [{"type": "text", "text": "x", "cache_control": {"type": 5}}],
        [{"type": "search_result", "source": "s", "title": "t", "content": []}],
        BAD_UTF8, [{"type": "text", "text": BAD_UTF8}],
    ],
    ("system",): [5, [5], [{"type": "image"}], [{"type": "text"}], {}, "", LONE_SURROGATE],
    ("temperature",): [1.5, -0.1, "x", BIG, HUGE_FLOAT],
    ("top_p",): [2, "x"],
    ("top_k",): [-1, BIG, 1.5, "5"],
    ("stop_sequences",): ["x", [1], {}],
    ("stream",): ["yes", 1],
    ("tools",): ["x", {}, [1], [{}], [{"name": "f"}], [{"name": "f", "input_schema": 5}],
                 [{"name": "", "input_schema": {}}], [{"type": "web_search_20250305", "name": "web_search"}],
                 [{"name": 5, "input_schema": {}}], [{"name": "f", "input_schema": BIG_SCHEMA}],
                 [{"name": BAD_UTF8, "input_schema": {}}]],
    ("tool_choice",): ["auto", 5, {}, {"type": "garbage"}, {"type": "tool"}, {"type": "tool", "name": "nope"},
                       {"type": "any"}, {"type": "none"}],
    ("thinking",): ["x", {}, {"type": "enabled"}, {"type": "enabled", "budget_tokens": BIG},
                    {"type": "enabled", "budget_tokens": -1}, {"type": "enabled", "budget_tokens": "5"},
                    {"type": "enabled", "budget_tokens": 4}, {"type": "bogus"}, {"type": "adaptive"},
                    {"type": "disabled"}],
    ("effort",): [5, "", "max"],
    ("metadata",): ["x", {"user_id": 5}, {"user_id": "u"}],
    ("output_config",): [5, {"format": {"type": "xml"}}, {"format": {"type": "json_schema", "schema": 5}},
                         {"effort": 5}, {"format": {"type": "json_schema", "schema": {"type": "object"}}},
                         {"format": {"type": "json_schema", "schema": BIG_SCHEMA}}],
    ("service_tier",): [5],
    ("container",): [{"a": BIG}],
    ("x_unknown",): [DEEP_ARRAY, DEEP_OBJECT, LONE_SURROGATE, BAD_UTF8, HUGE_FLOAT, {"a": [HUGE_FLOAT]}],
}

GENERATE_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("contents",): [
        {}, [], "x", 5, None, DELETE, [5], [{}], [{"role": "robot", "parts": [{"text": "x"}]}],
        [{"parts": []}], [{"parts": [{}]}], [{"parts": [{"text": 5}]}], [{"parts": "x"}],
        [{"role": 5, "parts": [{"text": "x"}]}],
        [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "!!!"}}]}],
        [{"parts": [{"inlineData": {"mimeType": "image/png"}}]}],
        [{"parts": [{"inlineData": "x"}]}],
        [{"parts": [{"inline_data": {"mime_type": 5, "data": "x"}}]}],
        [{"parts": [{"fileData": {"fileUri": "not a url"}}]}],
        [{"parts": [{"fileData": {}}]}],
        [{"parts": [{"fileData": {"fileUri": "gs://bucket/x.pdf", "mimeType": "application/pdf"}}]}],
        [{"parts": [{"functionCall": {"name": "f", "args": "x"}}]}],
        [{"parts": [{"functionCall": {"args": {}}}]}],
        [{"role": "user", "parts": [{"text": "x"}]},
         {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
         {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": 5}}]}],
        [{"parts": [{"functionResponse": {"name": "g", "response": {"x": BIG}}}]}],
        [{"role": "model", "parts": [{"text": "x"}]}],
        [{"parts": [{"thought": True}]}],
        [{"parts": [{"text": ""}]}],
        [{"parts": [{"text": "x", "thoughtSignature": 5}]}],
        [{"parts": [{"thoughtSignature": "abc"}]}],
        [{"parts": [{"executableCode": {"code": 5}}]}],
        [{"parts": [{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "x"}}]}],
        [{"parts": [{"text": LONE_SURROGATE}]}],
        [{"parts": [{"text": BAD_UTF8}]}],
        [{"role": "user", "parts": [{"text": "x"}]},
         {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": BIG}}}]},
         {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"a": BIG}}}]}],
    ],
    ("generationConfig",): [
        "x", 5, [], {"maxOutputTokens": -1}, {"maxOutputTokens": 0}, {"maxOutputTokens": BIG},
        {"maxOutputTokens": "10"}, {"maxOutputTokens": 1.5}, {"temperature": 5}, {"temperature": "x"},
        {"candidateCount": 0}, {"candidateCount": BIG}, {"candidateCount": 3}, {"topK": 0}, {"topP": 5},
        {"stopSequences": "x"}, {"stopSequences": [5]},
        {"responseMimeType": "application/json", "responseSchema": 5},
        {"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT", "properties": "x"}},
        {"responseMimeType": 5}, {"thinkingConfig": {"thinkingBudget": -5}},
        {"thinkingConfig": {"thinkingBudget": BIG}}, {"thinkingConfig": "x"},
        {"thinkingConfig": {"thinkingLevel": 5}}, {"responseLogprobs": True, "logprobs": BIG}, {"seed": BIG},
        {"presencePenalty": "x"}, {"max_output_tokens": -3}, {"responseModalities": "x"}, {"speechConfig": 5},
        {"topK": BIG}, {"responseMimeType": "application/json", "responseSchema": BIG_SCHEMA},
        {"responseMimeType": "application/json", "responseJsonSchema": BIG_SCHEMA},
    ],
    ("systemInstruction",): ["x", 5, {}, {"parts": 5},
                             {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
                             {"parts": [{}]}, {"parts": [{"text": 5}]}],
    ("tools",): ["x", {}, [5], [{"functionDeclarations": [{"name": ""}]}], [{"functionDeclarations": [{}]}],
                 [{"functionDeclarations": [{"name": "f", "parameters": "x"}]}],
                 [{"functionDeclarations": [{"name": "f", "parameters": {
                     "type": "OBJECT", "properties": {"a": {"type": 5}}}}]}],
                 [{"googleSearch": {}}], [{"functionDeclarations": "x"}],
                 [{"functionDeclarations": [{"name": "f", "parametersJsonSchema": "x"}]}],
                 [{"functionDeclarations": [{"name": "f", "parameters": BIG_SCHEMA}]}]],
    ("toolConfig",): ["x", {"functionCallingConfig": {"mode": "WEIRD"}},
                      {"functionCallingConfig": {"mode": 5}},
                      {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["nope"]}},
                      {"functionCallingConfig": {"mode": "ANY"}}],
    ("safetySettings",): ["x", [5], [{"category": 5}]],
    ("cachedContent",): [5, "cachedContents/x"],
    ("labels",): [[1], {"a": 5}],
    ("x_unknown",): [DEEP_ARRAY, DEEP_OBJECT, LONE_SURROGATE, BAD_UTF8],
}

COUNT_TOKENS_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    **GENERATE_FIELDS,
    ("generateContentRequest",): [5, "x", {}, {"contents": 5}, {"contents": []}, DEEP_OBJECT,
                                  {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": "x"}],
}

EMBED_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("content",): [5, "x", {}, None, DELETE, {"parts": []}, {"parts": 5}, {"parts": [{}]},
                   {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]},
                   {"parts": [{"text": ""}]},
                   {"parts": [{"text": 5}]}, {"parts": [{"text": LONE_SURROGATE}]}],
    ("taskType",): ["BOGUS", 5, "RETRIEVAL_DOCUMENT"],
    ("title",): ["t", 5],
    ("outputDimensionality",): [0, -1, BIG, "5", 1.5, 4],
    ("model",): ["models/other", 5, ""],
    ("x_unknown",): [DEEP_ARRAY],
}

BATCH_EMBED_FIELDS: dict[tuple[Any, ...], list[Any]] = {
    ("requests",): [{}, [], 5, [5], [{}], [{"content": 5}], DELETE, None,
                    [{"model": "models/other", "content": {"parts": [{"text": "x"}]}}],
                    [{"content": {"parts": [{"text": "x"}]}, "taskType": "BOGUS"}],
                    [{"content": {"parts": [{"text": "x"}]}, "outputDimensionality": BIG}],
                    [{"content": {"parts": [{"text": "x"}]}}, {"content": {"parts": []}}]],
    ("requests", 0, "model"): [5, "models/", "", DELETE],
    ("requests", 0, "content", "parts"): [[{"text": LONE_SURROGATE}], "x"],
    ("x_unknown",): [DEEP_OBJECT],
}

CHAT_PATH = fixed("/v1/chat/completions")
STREAM = (("stream", True),)

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("chat", "chat", ("sim-chat", "sim-claude", "sim-gemini"), chat_body,
             (Variant("", CHAT_PATH), Variant("stream", CHAT_PATH, STREAM)), CHAT_FIELDS),
    Endpoint("completions", "chat", ("sim-chat", "sim-claude", "sim-gemini"), completion_body,
             (Variant("", fixed("/v1/completions")), Variant("stream", fixed("/v1/completions"), STREAM)),
             COMPLETION_FIELDS),
    Endpoint("embeddings", "chat", ("sim-embed", "sim-gemini-embed"), embeddings_body,
             (Variant("", fixed("/v1/embeddings")),), EMBEDDINGS_FIELDS),
    Endpoint("messages", "messages", ("sim-claude", "sim-chat", "sim-gemini"), messages_body,
             (Variant("", fixed("/v1/messages")), Variant("stream", fixed("/v1/messages"), STREAM)),
             MESSAGES_FIELDS),
    Endpoint("count_tokens", "messages", ("sim-claude", "sim-gemini"), messages_body,
             (Variant("", fixed("/v1/messages/count_tokens")),), MESSAGES_FIELDS),
    Endpoint("generateContent", "v1beta", ("sim-gemini", "sim-chat", "sim-claude"), generate_body,
             (Variant("", model_method("/v1beta", "generateContent")),
              Variant("stream-array", model_method("/v1beta", "streamGenerateContent")),
              Variant("stream-sse", model_method("/v1beta", "streamGenerateContent?alt=sse")),
              Variant("v1", model_method("/v1", "generateContent"))),
             GENERATE_FIELDS),
    Endpoint("embedContent", "v1beta", ("sim-gemini-embed", "sim-embed"), embed_body,
             (Variant("", model_method("/v1beta", "embedContent")),
              Variant("v1", model_method("/v1", "embedContent"))), EMBED_FIELDS),
    Endpoint("batchEmbedContents", "v1beta", ("sim-gemini-embed", "sim-embed"), batch_embed_body,
             (Variant("", model_method("/v1beta", "batchEmbedContents")),), BATCH_EMBED_FIELDS),
    Endpoint("countTokens", "v1beta", ("sim-gemini", "sim-claude"), generate_body,
             (Variant("", model_method("/v1beta", "countTokens")),
              Variant("v1", model_method("/v1", "countTokens"))), COUNT_TOKENS_FIELDS),
)
ENDPOINT_IDS = [e.name for e in ENDPOINTS]

# Bodies that are no JSON object at all: always a 400, whatever the endpoint.
NOT_AN_OBJECT: tuple[tuple[str, bytes], ...] = (
    ("empty", b""),
    ("whitespace", b"  \r\n\t "),
    ("not-json", b"not json at all"),
    ("truncated", b'{"model": "sim-chat", "messages": ['),
    ("single-quotes", b"{'model': 'sim-chat'}"),
    ("missing-value", b'{"model": }'),
    ("trailing-comma", b'{"model": "sim-chat",}'),
    ("two-documents", b'{"a": 1}{"b": 2}'),
    ("array", b"[]"),
    ("array-of-object", b'[{"model": "sim-chat"}]'),
    ("string", b'"a string"'),
    ("number", b"42"),
    ("float", b"-1.5e3"),
    ("huge-int", str(BIG).encode()),
    ("null", b"null"),
    ("true", b"true"),
    ("nan", b"NaN"),
    ("invalid-utf8", b"\xff\xfe\xfd"),
    ("invalid-utf8-in-string", b'{"model": "\xff\xfe"}'),
    ("nul-bytes", b"\x00\x00\x00"),
    ("deep-array", bytes(DEEP_ARRAY)),
    ("deep-object", bytes(DEEP_OBJECT)),
    ("empty-object", b"{}"),
)


def field_cases(endpoint: Endpoint, fields: dict[tuple[Any, ...], list[Any]] | None = None) -> Iterator[Case]:
    """Each bad value of ``fields`` in a valid body, for every model and variant."""
    for model in endpoint.models:
        for variant in endpoint.variants:
            for path, values in (fields or endpoint.fields).items():
                for i, value in enumerate(values):
                    doc = endpoint.request_body(model, variant)
                    set_path(doc, path, value)
                    where = ".".join(map(str, path))
                    yield Case(f"{endpoint.name}/{model}/{variant.label}/{where}#{i}={short(value)}", "POST",
                               variant.path(model), endpoint.family, endpoint.family, body=dumps(doc))


def set_path(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    node = doc
    for step in path[:-1]:
        node = node[step]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def baseline_cases(endpoint: Endpoint) -> Iterator[Case]:
    """The valid body on every model and variant: 200 (the harness itself is right)."""
    for model in endpoint.models:
        for variant in endpoint.variants:
            body = dumps(endpoint.request_body(model, variant))
            yield Case(f"{endpoint.name}/{model}/{variant.label}/valid", "POST", variant.path(model),
                       endpoint.family, endpoint.family, body=body, expect=status_set(200))


def body_cases(endpoint: Endpoint) -> Iterator[Case]:
    model = endpoint.models[0]
    for variant in endpoint.variants:
        for label, body in NOT_AN_OBJECT:
            yield Case(f"{endpoint.name}/{variant.label}/{label}", "POST", variant.path(model),
                       endpoint.family, endpoint.family, body=body, expect=BAD_REQUEST)
        valid = dumps(endpoint.request_body(model, variant))
        yield Case(f"{endpoint.name}/{variant.label}/bom", "POST", variant.path(model), endpoint.family,
                   endpoint.family, body=b"\xef\xbb\xbf" + valid, expect=status_set(200, 400))
        yield Case(f"{endpoint.name}/{variant.label}/trailing-garbage", "POST", variant.path(model),
                   endpoint.family, endpoint.family, body=valid + b"garbage", expect=BAD_REQUEST)
        yield Case(f"{endpoint.name}/{variant.label}/utf16", "POST", variant.path(model), endpoint.family,
                   endpoint.family, body=valid.decode().encode("utf-16"), expect=BAD_REQUEST)


CONTENT_TYPES = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz",
                 "application/json; charset=latin-1", "application/xml", "", None)
WRONG_METHODS = ("GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD")


def protocol_cases(endpoint: Endpoint) -> Iterator[Case]:
    """Content types, a form body, wrong methods and bad credentials on a valid body."""
    model = endpoint.models[0]
    for variant in endpoint.variants:
        path = variant.path(model)
        valid = dumps(endpoint.request_body(model, variant))
        for i, content_type in enumerate(CONTENT_TYPES):
            yield Case(f"{endpoint.name}/{variant.label}/content-type#{i}={content_type}", "POST", path,
                       endpoint.family, endpoint.family, body=valid, content_type=content_type)
        yield Case(f"{endpoint.name}/{variant.label}/form-body", "POST", path, endpoint.family,
                   endpoint.family, body=b"model=sim-chat&messages=hi",
                   content_type="application/x-www-form-urlencoded", expect=BAD_REQUEST)
        yield Case(f"{endpoint.name}/{variant.label}/chunked", "POST", path, endpoint.family, endpoint.family,
                   body=valid, chunked=True, expect=status_set(200))
        yield Case(f"{endpoint.name}/{variant.label}/chunked-truncated", "POST", path, endpoint.family,
                   endpoint.family, body=valid[:-3], chunked=True, expect=BAD_REQUEST)
        for i, (name, value) in enumerate((("Content-Encoding", "gzip"), ("Content-Encoding", "br, zstd"),
                                           ("Accept", "text/html"), ("Accept-Encoding", "gzip"),
                                           ("anthropic-beta", "caf\u00e9"), ("anthropic-beta", "x" * 8000),
                                           ("vendorb-beta", ", ,\t,"),
                                           ("anthropic-beta", "prompt-caching-2024-07-31"),
                                           ("X-Forwarded-For", "not-an-ip, 999.1.1.1"),
                                           ("X-Service-Request-Id", "req_forged"))):
            yield Case(f"{endpoint.name}/{variant.label}/header#{i}={name}", "POST", path, endpoint.family,
                       endpoint.family, body=valid, headers=((name, value),))
        for method in WRONG_METHODS:
            # GET /v1[beta]/models/{m}:{method} reads a model named "{m}:{method}": 404; under /v1 that
            # is the chat family's read, which wants the chat credential (401 with this one).
            chat_read = method in ("GET", "HEAD") and path.startswith("/v1/models/")
            yield Case(f"{endpoint.name}/{variant.label}/method-{method}", method, path,
                       "chat" if chat_read else endpoint.family, endpoint.family,
                       body=valid if method not in ("GET", "HEAD", "OPTIONS") else None,
                       expect=status_set(401, 404) if chat_read else NOT_ALLOWED)
        for label, auth, headers, expect in credential_variants(endpoint.family):
            yield Case(f"{endpoint.name}/{variant.label}/auth-{label}", "POST", path, endpoint.family, auth,
                       body=valid, headers=headers, expect=expect)


def credential_variants(family: str) -> Iterator[tuple[str, str, tuple[tuple[str, str], ...],
                                                      frozenset[int]]]:
    """(label, auth kind, extra headers, expected statuses) of calls with bad credentials."""
    version = (("anthropic-version", "2023-06-01"),) if family == "messages" else ()
    yield "none", "none", version, UNAUTHORIZED
    yield "bearer-empty", "none", (*version, ("Authorization", "Bearer")), UNAUTHORIZED
    yield "basic", "none", (*version, ("Authorization", "Basic dXNlcjpwYXNz")), UNAUTHORIZED
    yield "long-key", "none", (*version, ("Authorization", "Bearer sk-" + "a" * 8000)), UNAUTHORIZED
    yield "latin1-key", "none", (*version, ("Authorization", "Bearer sk-caf\u00e9")), UNAUTHORIZED
    yield "user-token-shape", "none", (*version, ("Authorization", "Bearer ut-abcdef")), UNAUTHORIZED
    yield "unknown-key", "none", (*version, ("Authorization", "Bearer sk-unknownunknown")), UNAUTHORIZED
    if family == "messages":
        yield "x-api-key-garbage", "none", (*version, ("x-api-key", "garbage key")), UNAUTHORIZED
        for i, value in enumerate(("2023-02-30", "latest", "", "\u00b2023-06-01", "2023-06-01T00:00")):
            yield f"version#{i}", "chat", (("anthropic-version", value),), status_set(400)
        yield "version-missing", "chat", (), status_set(400)
    if family == "v1beta":
        yield "goog-key-garbage", "none", (("x-goog-api-key", "sk-nope"),), UNAUTHORIZED
        yield "vendorc-key-empty", "none", (("x-vendorc-api-key", ""),), UNAUTHORIZED


# --- the random mutator -----------------------------------------------------------------------------

IMAGE_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
TOOL_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def rich_chat(model: str) -> dict[str, Any]:
    return {
        "model": model, "max_tokens": 8, "temperature": 0.5, "top_p": 0.9, "n": 1, "stop": ["zzz"], "seed": 1,
        "user": "u", "metadata": {"k": "v"}, "tool_choice": "auto", "response_format": {"type": "text"},
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": PROMPT},
                {"type": "image_url",
                 "image_url": {"url": f"data:image/png;base64,{IMAGE_B64}", "detail": "low"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
            {"role": "user", "content": PROMPT},
        ],
        "tools": [{"type": "function",
                   "function": {"name": "lookup", "description": "d", "parameters": TOOL_SCHEMA}}],
    }


def rich_messages(model: str) -> dict[str, Any]:
    return {
        "model": model, "max_tokens": 8, "temperature": 0.5, "top_k": 5, "stop_sequences": ["zzz"],
        "metadata": {"user_id": "u"}, "tool_choice": {"type": "auto"},
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "lookup", "description": "d", "input_schema": TOOL_SCHEMA}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": PROMPT},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_B64}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": signature_for("hmm")},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": "42"}]},
                {"type": "text", "text": PROMPT}]},
        ],
    }


def rich_generate(model: str) -> dict[str, Any]:
    return {
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {"role": "user", "parts": [{"text": PROMPT},
                                       {"inlineData": {"mimeType": "image/png", "data": IMAGE_B64}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {"q": "x"}},
                                         "thoughtSignature": SIGNATURE}]},
            {"role": "user",
             "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "42"}}}]},
            {"role": "user", "parts": [{"text": PROMPT}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "lookup", "description": "d", "parameters": {
            "type": "OBJECT", "properties": {"q": {"type": "STRING"}}, "required": ["q"]}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"maxOutputTokens": 8, "temperature": 0.5, "topP": 0.9, "topK": 5,
                             "stopSequences": ["zzz"], "thinkingConfig": {"includeThoughts": True}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }


def rich_embeddings(model: str) -> dict[str, Any]:
    return {"model": model, "input": ["hello", "world"], "encoding_format": "float", "dimensions": 4}


def rich_batch_embed(model: str) -> dict[str, Any]:
    return {"requests": [{"model": f"models/{model}", "content": {"parts": [{"text": "hello"}]},
                          "taskType": "RETRIEVAL_DOCUMENT", "title": "t", "outputDimensionality": 4},
                         {"model": f"models/{model}", "content": {"parts": [{"text": "world"}]}}]}


ODD_VALUES: list[Any] = [None, True, False, 0, -1, 1.5, BIG, -BIG, "", "x", LONE_SURROGATE, [], {}, [1],
                         ["x"], {"type": "text"}, {"type": "bogus"}, HUGE_FLOAT,
                         RawJSON(b"[" * 50 + b"]" * 50), BAD_UTF8]


def nodes(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from nodes(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from nodes(value, (*path, i))


def get_path(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def mutate(doc: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """A copy of ``doc`` with one to three random changes, and a description of them."""
    doc = copy.deepcopy(doc)
    done = []
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(nodes(doc))[1:])
        parent = get_path(doc, path[:-1])
        key = path[-1]
        kind = rng.choice(("replace", "replace", "replace", "delete", "wrap", "add", "duplicate"))
        if kind == "delete":
            del parent[key]
        elif kind == "wrap":
            parent[key] = rng.choice(([parent[key]], {"value": parent[key]}))
        elif kind == "add" and isinstance(parent, dict):
            key = rng.choice(("type", "role", "text", "x_extra", "content", "id", "name"))
            parent[key] = rng.choice(ODD_VALUES)
        elif kind == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            kind = "replace"
            parent[key] = rng.choice(ODD_VALUES)
        done.append(f"{kind} {'.'.join(map(str, path))}")
        if not list(nodes(doc))[1:]:
            break
    return doc, "; ".join(done)


_BY_NAME = {e.name: e for e in ENDPOINTS}
# endpoint name -> (endpoint, its rich valid body, how many mutations)
FUZZ: dict[str, tuple[Endpoint, Callable[[str], dict[str, Any]], int]] = {
    "chat": (_BY_NAME["chat"], rich_chat, 100),
    "messages": (_BY_NAME["messages"], rich_messages, 100),
    "generateContent": (_BY_NAME["generateContent"], rich_generate, 100),
    "embeddings": (_BY_NAME["embeddings"], rich_embeddings, 30),
    "batchEmbedContents": (_BY_NAME["batchEmbedContents"], rich_batch_embed, 30),
}


def fuzz_cases(name: str, seed: int) -> Iterator[Case]:
    endpoint, rich, count = FUZZ[name]
    rng = random.Random(seed)
    for model in endpoint.models:  # the rich body itself is valid on every model and variant
        for variant in endpoint.variants:
            yield Case(f"{name}/{model}/{variant.label}/rich", "POST", variant.path(model), endpoint.family,
                       endpoint.family, body=dumps(endpoint.request_body(model, variant, rich(model))),
                       expect=status_set(200))
    for i in range(count):
        model = rng.choice(endpoint.models)
        variant = rng.choice(endpoint.variants)
        doc, what = mutate(endpoint.request_body(model, variant, rich(model)), rng)
        yield Case(f"{name}/fuzz#{i} {model} {variant.label}: {what}", "POST", variant.path(model),
                   endpoint.family, endpoint.family, body=dumps(doc))


# --- the generation and embedding endpoints: tests ---------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
async def test_valid_bodies_are_served(gw: Any, caplog: pytest.LogCaptureFixture, endpoint: Endpoint) -> None:
    """The harness itself: the valid body of each endpoint is a 200 on every model and variant."""
    await fund(gw)
    await run_cases(gw, list(baseline_cases(endpoint)), caplog)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
async def test_bodies_that_are_not_an_object(gw: Any, caplog: pytest.LogCaptureFixture,
                                             endpoint: Endpoint) -> None:
    await run_cases(gw, list(body_cases(endpoint)), caplog)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
async def test_fields_of_the_wrong_type_or_range(gw: Any, caplog: pytest.LogCaptureFixture,
                                                 endpoint: Endpoint) -> None:
    await fund(gw)
    await run_cases(gw, list(field_cases(endpoint)), caplog)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
async def test_content_types_methods_and_credentials(gw: Any, caplog: pytest.LogCaptureFixture,
                                                     endpoint: Endpoint) -> None:
    await fund(gw)
    await run_cases(gw, list(protocol_cases(endpoint)), caplog)


@pytest.mark.parametrize("name", list(FUZZ))
async def test_random_mutations(gw: Any, caplog: pytest.LogCaptureFixture, name: str) -> None:
    await fund(gw)
    await run_cases(gw, list(fuzz_cases(name, seed=sum(map(ord, name)))), caplog)


# --- bodies over the limit ------------------------------------------------------------------------------

LIMIT = 4096


async def with_user(handle: Any) -> Any:
    """``handle`` with a funded user and an unrestricted key, as the ``gw`` fixture makes them."""
    handle.user = await handle.create_user("u", quota_usd=1_000_000)
    handle.key_record = await handle.create_key(handle.user["id"], name="test")
    return handle


def oversized_cases() -> Iterator[Case]:
    for endpoint in ENDPOINTS:
        model = endpoint.models[0]
        for variant in endpoint.variants:
            doc = endpoint.request_body(model, variant)
            doc["x_padding"] = "p" * LIMIT
            for chunked in (False, True):
                label = "chunked" if chunked else "declared"
                yield Case(f"{endpoint.name}/{variant.label}/over-limit-{label}", "POST", variant.path(model),
                           endpoint.family, endpoint.family, body=dumps(doc), chunked=chunked,
                           expect=status_set(413))
    for path, family in (("/admin/users", "chat"), ("/v1/nope", "chat"), ("/v1beta/nope", "v1beta"),
                         ("/v1/messages/nope", "messages")):
        yield Case(f"{path}/over-limit", "POST", path, family, "admin", body=b"{" + b" " * LIMIT + b"}",
                   expect=status_set(404, 413))


async def test_bodies_over_the_limit(gateway_server: Any, make_config: Any,
                                     caplog: pytest.LogCaptureFixture) -> None:
    handle = await with_user(await gateway_server(make_config(limits={"json_body_bytes": LIMIT})))
    await run_cases(handle, list(oversized_cases()), caplog)


# --- aliased models: the fast path rewrites the model id in the client's bytes --------------------------

ALIASES = {"sim-chat": "alias-chat", "sim-claude": "alias-claude", "sim-gemini": "alias-gemini",
           "sim-embed": "alias-embed", "sim-gemini-embed": "alias-gemini-embed"}


@pytest_asyncio.fixture
async def aliased_gw(gateway_server: Any, make_config: Any, simulator: Any) -> Any:
    """A gateway whose ``alias-*`` models reach the simulator under their ``sim-*`` ids, with a
    funded user and key like ``gw``'s."""
    def upstream(name: str, protocol: str, public: tuple[str, ...]) -> dict[str, Any]:
        return {"name": name, "protocol": protocol, "base_url": simulator.base_url, "api_key": "sk-sim",
                "models": {ALIASES[m]: m for m in public}}

    config = make_config(
        extra_models=[{"id": alias, "price": {"input_per_mtok": 1, "output_per_mtok": 1}}
                      for alias in ALIASES.values()],
        extra_upstreams=[upstream("alias-openai", "chat", ("sim-chat", "sim-embed")),
                         upstream("alias-anthropic", "messages", ("sim-claude",)),
                         upstream("alias-google", "v1beta", ("sim-gemini", "sim-gemini-embed"))])
    return await with_user(await gateway_server(config))


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
async def test_aliased_models(aliased_gw: Any, caplog: pytest.LogCaptureFixture, endpoint: Endpoint) -> None:
    """The field table on the same-format model under an alias (the fast path re-encodes the body),
    and the valid body on every aliased model."""
    aliased = dataclasses.replace(endpoint, models=tuple(ALIASES[m] for m in endpoint.models))
    same_format = dataclasses.replace(aliased, models=aliased.models[:1])
    await run_cases(aliased_gw, [*baseline_cases(aliased), *field_cases(same_format)], caplog)


# --- models in the path ------------------------------------------------------------------------------

ODD_PATH_MODELS = ("..", "%2e%2e%2f%2e%2e%2fetc", "sim%00gemini", "%00", "%ff", "%ff%fe",
                   "%E6%A8%A1%E5%9E%8B",
                   "%F0%9F%92%A9", "a" * 5000, "", "models%2F", "models/", "sim-gemini%20", "sim-gemini%0A",
                   "%3A", ":", "sim-gemini:generateContent", "models/models/sim-gemini", "%25", "%",
                   "sim-gemini%2Fextra", "sim-gemini/extra", "SIM-GEMINI", "%ED%A0%80")
PATH_METHODS = ("generateContent", "streamGenerateContent", "streamGenerateContent?alt=sse", "embedContent",
                "batchEmbedContents", "countTokens", "bogusMethod", "GENERATECONTENT",
                "generateContent?alt=%00", "streamGenerateContent?alt=sse&alt=json",
                "streamGenerateContent?alt=SSE", "generateContent?key=")


def path_model_cases() -> Iterator[Case]:
    bodies = {"embedContent": embed_body("sim-gemini"), "batchEmbedContents": batch_embed_body("sim-gemini")}
    for prefix in ("/v1beta", "/v1"):
        for i, model in enumerate(ODD_PATH_MODELS):
            for method in PATH_METHODS:
                body = bodies.get(method, generate_body("sim-gemini"))
                yield Case(f"{prefix}/model#{i}={model[:20]}/{method}", "POST",
                           f"{prefix}/models/{model}:{method}",
                           "v1beta", "v1beta", body=dumps(body), expect=status_set(200, 400, 404, 405))
    for i, model in enumerate(ODD_PATH_MODELS):
        yield Case(f"v1beta-get/model#{i}={model[:20]}", "GET", f"/v1beta/models/{model}", "v1beta", "v1beta",
                   expect=status_set(200, 404))
        yield Case(f"v1-get/model#{i}={model[:20]}", "GET", f"/v1/models/{model}", "chat", "chat",
                   expect=status_set(200, 404))


async def test_odd_models_in_the_path(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    await fund(gw)
    await run_cases(gw, list(path_model_cases()), caplog)


# --- listing, account and unknown routes ---------------------------------------------------------------


def read_cases() -> Iterator[Case]:
    """GET endpoints: their queries, wrong methods and the other credential."""
    q = "?start_date=2024-01-01&end_date=2024-01-05"
    gets = (("/v1/models", "chat", "chat"), ("/v1/models/sim-chat", "chat", "chat"),
            ("/v1beta/models", "v1beta", "v1beta"), ("/v1beta/models/sim-gemini", "v1beta", "v1beta"),
            ("/v1/dashboard/billing/subscription", "chat", "chat"),
            (f"/v1/dashboard/billing/usage{q}", "chat", "chat"),
            ("/api/user/self", "chat", "user"), ("/api/log/self", "chat", "user"))
    for path, family, auth in gets:
        yield Case(f"{path}/valid", "GET", path, family, auth, expect=status_set(200))
        for method in ("POST", "PUT", "PATCH", "DELETE"):  # (404: /v1beta's catch-all route)
            yield Case(f"{path}/method-{method}", method, path, family, auth, body=b"{}", expect=NOT_ALLOWED)
        other = "user" if auth != "user" else "chat"
        yield Case(f"{path}/auth-{other}", "GET", path, family, other, expect=UNAUTHORIZED)
        yield Case(f"{path}/auth-none", "GET", path, family, "none", expect=UNAUTHORIZED)
        yield Case(f"{path}/auth-garbage", "GET", path, family, "none",
                   headers=(("Authorization", "Bearer \u00ff\u00fe"),), expect=UNAUTHORIZED)
        yield Case(f"{path}/junk-query", "GET", path + ("&" if "?" in path else "?") + "x=%ff&%00=1&&=&a",
                   family, auth, expect=status_set(200))
    usage = "/v1/dashboard/billing/usage"
    dates = (("", ""), ("2024-01-01", None), (None, "2024-01-02"), ("2024-13-01", "2024-14-01"),
             ("2024-02-30", "2024-03-01"), ("2024-01-05", "2024-01-01"), ("2024-01-01", "2024-01-01"),
             ("2024-01-01", "2025-01-01"), ("0000-01-01", "0001-01-02"), ("0001-01-01", "0001-01-02"),
             ("9999-12-30", "9999-12-31"), ("9999-12-31", "10000-01-01"), ("9" * 5000, None), ("%00", "%ff"),
             ("%EF%BC%92024-01-01", "2024-01-02"), ("2024-01-01T00:00", "2024-01-02"), ("1704067200", "1"),
             ("2024-01-01&start_date=2023-01-01", "2024-01-02"))
    queries = [""]
    for start, end in dates:
        pairs = (("start_date", start), ("end_date", end))
        queries.append("?" + "&".join(f"{name}={value}" for name, value in pairs if value is not None))
    for i, query in enumerate(queries):
        yield Case(f"usage#{i}{query[:40]}", "GET", usage + query, "chat", "chat",
                   expect=status_set(200, 400))
    for i, query in enumerate(("?page=abc", "?page=-1", "?page=0", "?page=1e3", "?page=99999999999999999999",
                               "?page=1000000000&page_size=100", "?page=1000000001", "?page_size=0",
                               "?page_size=101", "?page_size=", "?page=%201%20", "?page=%00",
                               "?page=%EF%BC%91",
                               "?page=" + "9" * 5000, "?page=1.5", "?page=0x10", "?page=1&page=2")):
        yield Case(f"log#{i}{query[:40]}", "GET", "/api/log/self" + query, "chat", "user",
                   expect=status_set(200, 400))
    for i, query in enumerate(("?pageSize=abc", "?pageSize=-1", "?pageSize=0", "?pageSize=1e3",
                               "?pageSize=99999999999999999999", "?pageSize=" + "9" * 5000, "?pageToken=-1",
                               "?pageToken=99999999999999999999", "?pageToken=abc", "?pageSize=%00",
                               "?pageToken=" + "1" * 5000, "?pageSize=1&pageToken=1")):
        yield Case(f"v1beta-list#{i}{query[:40]}", "GET", "/v1beta/models" + query, "v1beta", "v1beta",
                   expect=status_set(200, 400))


UNKNOWN_ROUTES = (("/v1/nope", "chat"), ("/v1beta/nope", "v1beta"), ("/v1/messages/nope", "messages"),
                  ("/%ff", "chat"), ("/v1/chat/completions/extra", "chat"), ("//", "chat"),
                  ("/v1//chat/completions", "chat"), ("/v1beta", "v1beta"), ("/v1beta/", "v1beta"),
                  ("/v1beta/models/sim-gemini:generateContent/x", "v1beta"), ("/%00", "chat"),
                  ("/v1/messages%00", "messages"), ("/admin", "chat"), ("/admin/nope", "chat"),
                  ("/" + "a" * 5000, "chat"), ("/v1/models/sim-chat/extra%2F..", "chat"), ("/.env", "chat"),
                  ("/v1/%E6%A8%A1", "chat"))


def unknown_route_cases() -> Iterator[Case]:
    for path, family in UNKNOWN_ROUTES:
        for method in ("GET", "POST", "DELETE"):
            yield Case(f"{path[:40]}/{method}", method, path, family, "chat",
                       body=b"{}" if method == "POST" else None,
                       expect=status_set(200, 404, 405))


async def test_listing_account_and_unknown_routes(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    await run_cases(gw, [*read_cases(), *unknown_route_cases()], caplog)


# --- the admin API --------------------------------------------------------------------------------------

ADMIN_BODIES: dict[str, list[Any]] = {
    "/admin/users": [{"name": 5}, {"name": ""}, {"name": "x" * 300}, {"name": "a", "group": "nope"},
                     {"name": "a", "quota_usd": BIG}, {"name": "a", "quota_usd": -1},
                     {"name": "a", "quota_usd": "5"},
                     {"name": LONE_SURROGATE}, {"name": "a\x00b"}, {"name": "a", "group": LONE_SURROGATE},
                     {"name": "a", "x": 1}, {"name": "a", "quota_usd": HUGE_FLOAT}, {}],
    "/admin/users/{user}/topup": [{}, {"amount_usd": -1}, {"amount_usd": 0}, {"amount_usd": "5"},
                                  {"amount_usd": BIG}, {"amount_usd": 1e308}, {"amount_usd": None},
                                  {"amount_usd": 1, "x": 1}],
    "/admin/keys": [{}, {"user_id": BIG}, {"user_id": -BIG}, {"user_id": "1"}, {"user_id": 2**63},
                    {"user_id": 999999}, {"user_id": "{user}", "expires_at": BIG},
                    {"user_id": "{user}", "expires_at": 2**63}, {"user_id": "{user}", "expires_at": -1},
                    {"user_id": "{user}", "models": "x"}, {"user_id": "{user}", "models": [LONE_SURROGATE]},
                    {"user_id": "{user}", "models": ["no-such-model"]},
                    {"user_id": "{user}", "allow_ips": ["999.1.1.1"]},
                    {"user_id": "{user}", "allow_ips": ["::1/200"]},
                    {"user_id": "{user}", "allow_ips": [LONE_SURROGATE]},
                    {"user_id": "{user}", "allow_ips": "10.0.0.0/8"}, {"user_id": "{user}", "name": ""},
                    {"user_id": "{user}", "name": LONE_SURROGATE}, {"user_id": "{user}", "quota_usd": -1},
                    {"user_id": "{user}", "quota_usd": BIG}, {"user_id": "{user}", "enabled": "yes"},
                    {"user_id": "{user}", "unknown": 1}],
    "/admin/keys/{key}": [{"expires_at": BIG}, {"expires_at": 2**63}, {"quota_usd": "x"}, {"quota_usd": BIG},
                          {"name": LONE_SURROGATE}, {"models": [5]}, {"allow_ips": ["x"]}, {"enabled": None},
                          {"x": 1}, {}],
}


def admin_cases(user_id: int, key_id: int) -> Iterator[Case]:
    def fill(path: str) -> str:
        return path.replace("{user}", str(user_id)).replace("{key}", str(key_id))

    for template, bodies in ADMIN_BODIES.items():
        path = fill(template)
        method = "PATCH" if "{key}" in template else "POST"
        for i, body in enumerate(bodies):
            if isinstance(body, dict) and body.get("user_id") == "{user}":
                body = {**body, "user_id": user_id}
            yield Case(f"{template}#{i}={short(body)}", method, path, "chat", "admin", body=dumps(body),
                       expect=status_set(200, 201, 400, 404))
        for label, raw in NOT_AN_OBJECT:  # (an empty PATCH changes nothing: 200)
            expect = status_set(200, 400) if label == "empty-object" and method == "PATCH" else BAD_REQUEST
            yield Case(f"{template}/{label}", method, path, "chat", "admin", body=raw, expect=expect)
    for i, odd_id in enumerate(("99999999999999999999", str(2**63), str(2**64), "0", "-1", "1.5", "abc",
                                "%00",
                                "9" * 5000, "%EF%BC%91")):
        for method, template in (("GET", "/admin/users/{}"), ("POST", "/admin/users/{}/topup"),
                                 ("GET", "/admin/keys/{}"), ("PATCH", "/admin/keys/{}"),
                                 ("DELETE", "/admin/keys/{}")):
            body = {"amount_usd": 1} if "topup" in template else {"name": "n"} if method == "PATCH" else None
            yield Case(f"id#{i}/{method} {template}", method, template.format(odd_id), "chat", "admin",
                       body=dumps(body) if body is not None else None, expect=status_set(400, 404, 405))
    for i, query in enumerate(("abc", "99999999999999999999", str(2**63), "-1", "%00", "9" * 5000, "1.5",
                               "")):
        yield Case(f"keys?user_id#{i}", "GET", f"/admin/keys?user_id={query}", "chat", "admin",
                   expect=status_set(200, 400))
    for path in ("/admin/users", "/admin/keys", f"/admin/users/{user_id}", f"/admin/keys/{key_id}"):
        for label, headers in (("none", ()), ("garbage", (("Authorization", "Bearer \u00ff"),)),
                               ("basic", (("Authorization", "Basic YWRtaW4="),))):
            yield Case(f"{path}/auth-{label}", "GET", path, "chat", "none", headers=headers,
                       expect=UNAUTHORIZED)


async def test_admin_api(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    await run_cases(gw, list(admin_cases(gw.user["id"], gw.key_record["id"])), caplog)


# --- the tables themselves ------------------------------------------------------------------------------


def all_cases() -> Iterable[Case]:
    for endpoint in ENDPOINTS:
        yield from baseline_cases(endpoint)
        yield from body_cases(endpoint)
        yield from field_cases(endpoint)
        yield from protocol_cases(endpoint)
    for name in FUZZ:
        yield from fuzz_cases(name, seed=sum(map(ord, name)))
    yield from path_model_cases()
    yield from read_cases()
    yield from unknown_route_cases()
    yield from admin_cases(1, 1)
    yield from oversized_cases()
    for endpoint in ENDPOINTS:
        aliased = dataclasses.replace(endpoint, models=tuple(ALIASES[m] for m in endpoint.models))
        yield from baseline_cases(aliased)
        yield from field_cases(dataclasses.replace(aliased, models=aliased.models[:1]))


def test_the_tables_are_broad() -> None:
    """Every endpoint of the brief is covered, with hundreds of cases."""
    cases = list(all_cases())
    paths = {c.path.split("?")[0] for c in cases}
    for needed in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages",
                   "/v1/messages/count_tokens", "/v1beta/models/sim-gemini:generateContent",
                   "/v1beta/models/sim-gemini:streamGenerateContent",
                   "/v1beta/models/sim-gemini-embed:embedContent",
                   "/v1beta/models/sim-gemini-embed:batchEmbedContents",
                   "/v1beta/models/sim-gemini:countTokens",
                   "/v1/models/sim-gemini:generateContent", "/v1/models", "/v1/models/sim-chat",
                   "/v1beta/models",
                   "/v1/dashboard/billing/subscription", "/v1/dashboard/billing/usage", "/api/user/self",
                   "/api/log/self", "/admin/users", "/admin/keys"):
        assert needed in paths, needed
    assert any(c.path.endswith("?alt=sse") for c in cases)
    assert len(cases) > 2000
