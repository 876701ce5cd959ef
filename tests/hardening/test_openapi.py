"""``GET /openapi.json`` (issue 16, property 3): the gateway's own OpenAPI 3.1 document, generated
from the route table and the Structs each endpoint declares, and a fuzz driven by it.

* Shape: OpenAPI 3.1 fields, every ``$ref`` (discriminator mappings included) resolves, path
  parameters declared, operation ids unique; served without a credential, with the request id,
  built once per app.
* Completeness: every route of the app (its own route table) has an operation for each method,
  matched by Starlette itself; every operation is a route; the public routes are the only ones
  without security; the credential places of each family are its security schemes.
* Seeds: the valid bodies of ``test_fuzz.SEEDS`` validate against their operation's request schema
  (a small JSON Schema check, below: no validator is installed), and the check refuses a body
  without a required field.
* Fuzz: bodies generated from each JSON request schema (sometimes with the seed's values, so that
  calls reach the upstream), sent through the threaded gateway: no 5xx, the request id on every
  answer, every error in its family's envelope and valid against the document's error schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from gateway.edge.app import create_app
from gateway.edge.http import endpoint
from gateway.edge.openapi import build_document, documented
from gateway.hooks.specs import hookimpl
from gateway.settings.config import parse_config
from tests.hardening.test_fuzz import JSON, PUBLIC, SEEDS, _credential, _envelope_of, _shape
from tests.hardening.threaded import ThreadedGateway, running

EXAMPLES = 25  # per operation (33 JSON operations); the module stays well under a minute
REF = re.compile(r"^#/components/(schemas|securitySchemes)/(.+)$")
PARAMETER = re.compile(r"\{(\w+)\}")


@pytest.fixture(scope="module")
def tgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedGateway]:
    with running(Path(tmp_path_factory.mktemp("openapi")) / "gateway.db") as gateway:
        yield gateway


@pytest.fixture(scope="module")
def doc(tgw: ThreadedGateway) -> dict[str, Any]:
    answer = tgw.call("GET", "/openapi.json")  # no credential
    assert answer.status == 200, answer.body[:300]
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.headers.get("x-service-request-id", "").startswith("req_")
    document: dict[str, Any] = answer.json()
    return document


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield path, method.upper(), op


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    match = REF.match(ref)
    assert match, ref
    return doc["components"][match.group(1)][match.group(2)]


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            elif key == "mapping" and isinstance(value, dict):
                yield from value.values()
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


# --- shape ------------------------------------------------------------------------------------------

def test_the_document_is_openapi_3_1_and_every_ref_resolves(tgw: ThreadedGateway,
                                                            doc: dict[str, Any]) -> None:
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] and isinstance(doc["info"]["version"], str)
    assert set(doc["components"]) == {"schemas", "securitySchemes"}
    refs = list(_refs(doc))
    assert len(refs) > 100
    for ref in refs:
        assert isinstance(_resolve(doc, ref), dict), ref
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids))
    for path, method, op in _operations(doc):
        assert op["summary"] and "default" in op["responses"], (method, path)
        declared = [p["name"] for p in op.get("parameters", ()) if p["in"] == "path"]
        assert declared == PARAMETER.findall(path), (method, path)
        for requirement in op.get("security", ()):
            assert set(requirement) <= set(doc["components"]["securitySchemes"]), requirement
    # Built once per app: the same bytes again, kept by the plugin.
    again = tgw.call("GET", "/openapi.json")
    assert again.body == tgw.app.state.gateway.extensions["openapi"]
    assert orjson.loads(again.body) == doc


def _concrete(template: str) -> str:
    return PARAMETER.sub("x1", template)


def test_every_route_is_in_the_document_and_nothing_else(tgw: ThreadedGateway, doc: dict[str, Any]) -> None:
    operations = [(method, path) for path, method, _ in _operations(doc)]
    routes = [route for route in tgw.app.routes if isinstance(route, Route)]
    for route in routes:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            # Starlette itself matches the documented path (parameters filled in) to this route.
            found = [path for m, path in operations if m == method and route.matches(
                {"type": "http", "path": _concrete(path), "method": method})[0] == Match.FULL]
            assert found, (method, route.path)
    for method, path in operations:
        scope = {"type": "http", "path": _concrete(path), "method": method}
        assert any(r.matches(scope)[0] == Match.FULL for r in routes), (method, path)
    assert ("GET", "/openapi.json") in operations
    # v1beta's one route with the verb in a parameter is documented verb by verb.
    assert ("POST", "/v1beta/models/{model}:countTokens") in operations
    assert not any("{method}" in path for _, path in operations)


def test_security_follows_each_family_and_the_public_routes(doc: dict[str, Any]) -> None:
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer"}
    assert schemes["header.x-api-key"] == {"type": "apiKey", "in": "header", "name": "x-api-key"}
    assert schemes["header.x-goog-api-key"]["in"] == "header"
    assert schemes["query.key"] == {"type": "apiKey", "in": "query", "name": "key"}
    public = {path for path, _, op in _operations(doc) if op.get("security") == []}
    assert public == {"/healthz", "/readyz", "/metrics", "/console", "/console/",
                      "/console/static/{name}", "/openapi.json"}
    assert public == PUBLIC  # what the auth fuzz of test_fuzz lets answer 2xx without a key
    paths = doc["paths"]
    assert paths["/v1/messages"]["post"]["security"] == [{"header.x-api-key": []}, {"bearer": []}]
    generate = paths["/v1/models/{model}:generateContent"]["post"]
    assert {"query.key": []} in generate["security"] and generate["tags"] == ["v1beta"]
    assert paths["/v1/chat/completions"]["post"]["security"] == [{"bearer": []}]
    assert paths["/admin/users"]["post"]["security"] == [{"bearer": []}]
    # Each envelope once: the gateway's own (chat and the media families reuse it) and two others.
    errors = {op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"]
              for _, _, op in _operations(doc)}
    assert errors == {f"#/components/schemas/{n}.error" for n in ("gateway", "messages", "v1beta")}


# --- seeds validate ------------------------------------------------------------------------------------

def _is(kind: str, value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"null": value is None, "boolean": isinstance(value, bool), "string": isinstance(value, str),
            "integer": number and float(value).is_integer(), "number": number,
            "array": isinstance(value, list), "object": isinstance(value, dict)}[kind]


def valid(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    """The JSON Schema 2020-12 keywords msgspec and the gateway write: a small validator."""
    if "$ref" in schema:
        return valid(doc, _resolve(doc, schema["$ref"]), value)
    kinds = schema.get("type")
    checks = [
        not kinds or any(_is(k, value) for k in ([kinds] if isinstance(kinds, str) else kinds)),
        "anyOf" not in schema or any(valid(doc, s, value) for s in schema["anyOf"]),
        "enum" not in schema or value in schema["enum"],
        "const" not in schema or value == schema["const"],
    ]
    if _is("number", value):
        checks += [value >= schema.get("minimum", value), value <= schema.get("maximum", value),
                   "exclusiveMinimum" not in schema or value > schema["exclusiveMinimum"],
                   "exclusiveMaximum" not in schema or value < schema["exclusiveMaximum"]]
    if isinstance(value, str):
        checks += [schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)),
                   "pattern" not in schema or re.search(schema["pattern"], value) is not None]
    if isinstance(value, list):
        checks += [schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)),
                   all(valid(doc, schema.get("items", {}), item) for item in value)]
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        checks += [all(k in value for k in schema.get("required", ())),
                   all(valid(doc, props[k], v) if k in props else extra is not False
                       and (extra is True or valid(doc, extra, v)) for k, v in value.items())]
    return all(checks)


def _operation_for(doc: dict[str, Any], concrete: str) -> tuple[str, dict[str, Any]] | None:
    for path, item in doc["paths"].items():
        pattern = "^" + PARAMETER.sub("[^/]+", re.escape(path).replace(r"\{", "{").replace(r"\}", "}")) + "$"
        if re.match(pattern, concrete) and "post" in item:
            return path, item["post"]
    return None


def _request_schema(op: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = op["requestBody"]["content"]["application/json"]["schema"]
    return schema


def test_the_fuzz_seeds_validate_against_their_request_schema(doc: dict[str, Any]) -> None:
    for concrete, seed in SEEDS.items():
        found = _operation_for(doc, concrete.split("?")[0])
        assert found is not None, concrete
        path, op = found
        if path == "/api/keys":
            assert "requestBody" not in op  # its fields are checked as the admin API's, no own Struct
            continue
        schema = _request_schema(op)
        assert valid(doc, schema, seed), (concrete, seed)
        required = schema if "$ref" not in schema else _resolve(doc, schema["$ref"])
        for name in required.get("required", ()):
            assert not valid(doc, schema, {k: v for k, v in seed.items() if k != name}), (concrete, name)
    assert not valid(doc, {"$ref": "#/components/schemas/ChatCompletionRequest"},
                     {"model": "m", "messages": [{"role": "robot", "content": "x"}]})
    assert not valid(doc, {"$ref": "#/components/schemas/ChatCompletionRequest"},
                     {"model": "m", "messages": [], "temperature": 3})


def test_every_family_json_post_has_a_request_schema(doc: dict[str, Any]) -> None:
    undocumented = [path for path, method, op in _operations(doc)
                    if method == "POST" and op["tags"] != ["gateway"] and "requestBody" not in op]
    assert undocumented == ["/v1beta/{rest}"]  # the family's 404 for anything else under its prefix
    media = doc["paths"]["/v1/audio/transcriptions"]["post"]["requestBody"]["content"]
    assert set(media) == {"multipart/form-data"}
    assert set(doc["paths"]["/v1/videos"]["post"]["requestBody"]["content"]) == {
        "application/json", "multipart/form-data"}


# --- fuzz driven by the document ------------------------------------------------------------------------

def _strategy(doc: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of ``schema``, mostly valid ones; deep down only the required fields."""
    if "$ref" in schema:
        target = _resolve(doc, schema["$ref"])
        return st.deferred(lambda: _strategy(doc, target, depth + 1))
    if "anyOf" in schema:
        options = schema["anyOf"]
        if depth > 3 and {"type": "null"} in options:
            return st.none()
        return st.one_of([_strategy(doc, s, depth) for s in options])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_strategy(doc, {**schema, "type": k}, depth) for k in kind])
    if kind == "object" or "properties" in schema:
        props, required = schema.get("properties", {}), schema.get("required", [])
        optional = {} if depth > 3 else {k: _strategy(doc, s, depth + 1) for k, s in props.items()
                                           if k not in required}
        return st.fixed_dictionaries({k: _strategy(doc, props[k], depth + 1) for k in required},
                                     optional=optional)
    if kind == "array":
        size = 0 if depth > 3 else 3
        items = _strategy(doc, schema.get("items", {}), depth + 1)
        return st.lists(items, min_size=min(schema.get("minItems", 0), size), max_size=max(size, 1))
    simple: dict[Any, st.SearchStrategy[Any]] = {
        "string": st.text(min_size=schema.get("minLength", 0), max_size=max(schema.get("minLength", 0), 16)),
        "integer": st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum")),
        "number": st.floats(min_value=schema.get("minimum"), max_value=schema.get("maximum"),
                            allow_nan=False, allow_infinity=False),
        "boolean": st.booleans(), "null": st.none()}
    return simple.get(kind, JSON)


def _json_posts(doc: dict[str, Any]) -> list[str]:
    return [path for path, method, op in _operations(doc)
            if method == "POST" and "application/json" in op.get("requestBody", {}).get("content", {})]


def _seed_for(path: str) -> tuple[str, dict[str, Any]]:
    """A concrete path for ``path`` and its seed (the fuzz's own, when it has one)."""
    pattern = "^" + PARAMETER.sub("[^/]+", re.escape(path).replace(r"\{", "{").replace(r"\}", "}")) + "$"
    for concrete, seed in SEEDS.items():
        if re.match(pattern, concrete.split("?")[0]):
            return concrete.split("?")[0], seed
    return PARAMETER.sub(lambda m: "sim-gemini" if m.group(1) == "model" else "{id}", path), {}


def test_the_operations_fuzzed_cover_every_seed(doc: dict[str, Any]) -> None:
    fuzzed = {_seed_for(path)[0] for path in _json_posts(doc)}
    assert {s.split("?")[0] for s in SEEDS} - {"/api/keys"} <= fuzzed
    assert len(_json_posts(doc)) >= 30


def test_fuzz_from_the_document(tgw: ThreadedGateway, doc: dict[str, Any]) -> None:
    # ``{id}`` of the admin operations: a user of its own, so the fuzz's key keeps its quota.
    spare = tgw.call("POST", "/admin/users", {"name": "spare", "quota_usd": 1}, admin=True).json()["id"]
    targets = []
    for path in _json_posts(doc):
        concrete, seed = _seed_for(path)
        op = doc["paths"][path]["post"]
        envelope = op["responses"]["default"]["content"]["application/json"]["schema"]
        targets.append((concrete.replace("{id}", str(spare)), seed, _strategy(doc, _request_schema(op)),
                        envelope))
    statuses: dict[int, int] = {}

    @settings(max_examples=EXAMPLES * len(targets), deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        concrete, seed, bodies, envelope = data.draw(st.sampled_from(targets))
        body = data.draw(bodies)
        if seed and isinstance(body, dict):  # some of the seed's values, so that calls go deeper
            body.update({k: seed[k] for k in data.draw(st.sets(st.sampled_from(sorted(seed))))})
        raw = json.dumps(body).encode()  # integers wider than 64 bits too
        answer = tgw.call("POST", concrete, raw=raw, headers=_credential(concrete, tgw))
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
        assert answer.status < 500, (concrete, body, answer.status, answer.body[:300])
        assert answer.headers.get("x-service-request-id", "").startswith("req_"), (concrete, body)
        if answer.status >= 400:
            error = answer.json()
            assert _shape(error) == _envelope_of(tgw, concrete, answer.status), (concrete, body, error)
            assert valid(doc, envelope, error), (concrete, error)

    one()
    # Generated bodies both pass (2xx) and fail (4xx) the endpoints' checks.
    assert sum(n for s, n in statuses.items() if s < 300) > 0
    assert sum(n for s, n in statuses.items() if s >= 400) > 0


# --- a plugin's family -----------------------------------------------------------------------------------

@endpoint("toy")
@documented("Echo", request=dict[str, int], response={"type": "object"})
async def documented_echo(request: Request) -> Response:
    return Response(await request.body())


class DocumentedToyRoute:
    @hookimpl
    def gateway_routes(self, gateway: Any) -> list[BaseRoute]:
        return [Route("/toy/documented", documented_echo, methods=["POST"])]


def test_a_plugin_family_is_documented_from_its_own_declarations(tmp_path: Path) -> None:
    """test_seam's throw-away family: no ``credential_places`` (so no security scheme is claimed,
    its hint is said instead), its own envelope, and an endpoint declared with ``documented``."""
    from tests.core.test_seam import TOY_UPSTREAM, ToyPlugin

    config = parse_config(orjson.dumps({
        "database": f"sqlite:///{tmp_path / 'g.db'}", "models": [{"id": "sim-chat"}],
        "upstreams": [{"name": "u", "protocol": "chat", "base_url": "http://127.0.0.1:9",
                       "models": ["sim-chat"]}, TOY_UPSTREAM]}).decode())
    app = create_app(config, load_entrypoints=False, extra_plugins=[ToyPlugin(), DocumentedToyRoute()])
    doc = build_document(app.routes, app.state.gateway.families)
    echo = doc["paths"]["/toy/documented"]["post"]
    assert echo["summary"] == "Echo" and echo["tags"] == ["toy"] and "security" not in echo
    assert "x-toy-key" in echo["description"]
    assert echo["requestBody"]["content"]["application/json"]["schema"] == {
        "type": "object", "additionalProperties": {"type": "integer"}}
    assert echo["responses"]["200"]["content"]["application/json"]["schema"] == {"type": "object"}
    error = doc["components"]["schemas"]["toy.error"]
    assert error["required"] == ["toy_error"]
    assert error["properties"]["toy_error"]["properties"]["status"] == {"type": "integer"}
    # Undeclared: still there, with its methods; the built-in families are untouched.
    assert doc["paths"]["/toy/echo"]["post"]["summary"] == "Toy echo"
    boom = doc["paths"]["/toy/boom"]["get"]["responses"]["default"]["content"]["application/json"]
    assert boom["schema"] == {"$ref": "#/components/schemas/toy.error"}
    assert "/v1/messages" in doc["paths"]
