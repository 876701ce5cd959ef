"""The gateway's own OpenAPI 3.1 document, generated from the app's route table.

Every ``Route`` of the app is a path of the document, with its methods and path parameters (a
Starlette ``{name:path}`` becomes ``{name}``). What an endpoint takes and answers comes from its
``documented`` declarations: the request and response types (msgspec Structs, whose JSON Schema
2020-12 msgspec writes into ``components.schemas``), or a JSON Schema written out where no Struct
describes the wire (a multipart form). One handler serving several operations on one route (a verb
in a path parameter, ``/things/{id}:{verb}``) declares each, fixing that parameter. An endpoint
without a declaration still appears, with its methods and parameters.

The rest comes from the family that owns the path (``FamilyRegistry.for_path``): the security
schemes from the places it reads its caller's key (``credential_places``; a family that declares
none is documented with its ``credential_hint`` only), and the error responses from its envelope,
described from errors the family itself renders, so the document cannot drift from what clients
get. Paths no family owns take a Bearer credential and the gateway's own envelope.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec
import orjson
from starlette.routing import BaseRoute, Route

from gateway.relay.families import BEARER, CredentialPlace, FamilyRegistry, WireFamily, render_default_error
from gateway.runtime.errors import GatewayError

__all__ = ["JSON", "MULTIPART", "DeclaresCredential", "Operation", "build_document", "describe_errors",
           "documented", "operations_of"]

OPENAPI_VERSION = "3.1.0"
REF_TEMPLATE = "#/components/schemas/{name}"
JSON = "application/json"
MULTIPART = "multipart/form-data"
EVENT_STREAM = "text/event-stream"
GATEWAY_ERROR = "gateway.error"  # the component of the gateway's own envelope
_ATTRIBUTE = "__openapi_operations__"
_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")
# Errors rendered to learn a family's envelope: with and without ``param``, client and server side.
_ERROR_SAMPLES = (GatewayError("m", status=400, code="c", param="p"), GatewayError("m", status=401, code="c"),
                  GatewayError("m", status=404, code="c"), GatewayError("m", status=429, code="c"),
                  GatewayError("m", status=500, code="c"))

Handler = TypeVar("Handler", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Operation:
    """One documented operation of an endpoint. ``request`` and ``response`` are types msgspec
    can describe (a Struct, a union, ``list[...]``) or a JSON Schema as a dict; None: no body
    (request) or an undescribed one (response)."""

    summary: str
    request: object = None
    response: object = None
    media_type: str | tuple[str, ...] = JSON  # of the request body (one, or each it may come in)
    status: int = 200
    stream: bool = False  # also answers ``text/event-stream`` when asked to stream
    public: bool = False  # no credential
    path: Mapping[str, str] = field(default_factory=dict)  # path parameters this operation fixes


@runtime_checkable
class DeclaresCredential(Protocol):
    """A ``WireFamily`` that also says where its ``credential`` looks (optional for a family)."""

    @property
    def credential_places(self) -> tuple[CredentialPlace, ...]: ...


def documented(summary: str, *, request: object = None, response: object = None,
               media_type: str | tuple[str, ...] = JSON,
               status: int = 200, stream: bool = False, public: bool = False,
               path: Mapping[str, str] | None = None) -> Callable[[Handler], Handler]:
    """Declare an operation of the decorated endpoint (see ``Operation``). Stacked declarations
    are several operations, in the order written; ``gateway.edge.http.endpoint`` keeps them (above or
    below it)."""
    operation = Operation(summary, request, response, media_type, status, stream, public, dict(path or {}))

    def mark(handler: Handler) -> Handler:
        setattr(handler, _ATTRIBUTE, (operation, *operations_of(handler)))
        return handler

    return mark


def operations_of(endpoint: object) -> tuple[Operation, ...]:
    found = getattr(endpoint, _ATTRIBUTE, ())
    return tuple(op for op in found if isinstance(op, Operation)) if isinstance(found, tuple) else ()


@dataclass(frozen=True, slots=True)
class _Entry:
    path: str  # the OpenAPI template
    method: str
    route: Route
    operation: Operation | None


def build_document(routes: Iterable[BaseRoute], families: FamilyRegistry, *,
                   title: str = "Model gateway") -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (an app's route table, in matching order: on a clash
    of path and method the first route is the one served, and the one documented)."""
    entries: dict[tuple[str, str], _Entry] = {}
    for entry in _entries(routes):
        entries.setdefault((entry.path, entry.method), entry)
    types = _types(entry.operation for entry in entries.values())
    refs, schemas = msgspec.json.schema_components(types, ref_template=REF_TEMPLATE) if types else ((), {})
    by_type = {id(t): ref for t, ref in zip(types, refs, strict=True)}
    errors = _Errors(families, schemas)
    security: dict[str, dict[str, Any]] = {}
    paths: dict[str, dict[str, Any]] = {}
    ids: set[str] = set()
    for (path, method), entry in entries.items():
        family = families.for_path(_PARAMETER.sub("x", path))
        operation = _operation(entry, family, by_type, errors, security)
        base, n = operation["operationId"], 1
        while operation["operationId"] in ids:  # "/a" and "/a/" both routed
            n += 1
            operation["operationId"] = f"{base}_{n}"
        ids.add(operation["operationId"])
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": _version(),
                 "description": "Generated from the gateway's routes and the Structs of each endpoint."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": security},
    }


def _entries(routes: Iterable[BaseRoute]) -> Iterator[_Entry]:
    for route in routes:
        if not isinstance(route, Route):
            continue
        methods = sorted(m for m in (route.methods or ("GET",)) if m != "HEAD")
        for operation in operations_of(route.endpoint) or (None,):
            path = _template(route.path, operation.path if operation is not None else {})
            for method in methods:
                yield _Entry(path, method, route, operation)


def _template(path: str, fixed: Mapping[str, str]) -> str:
    """``path`` with the parameters ``fixed`` gives filled in and the others as ``{name}``."""
    return _PARAMETER.sub(lambda m: fixed.get(m.group(1), "{" + m.group(1) + "}"), path)


def _types(operations: Iterable[Operation | None]) -> list[Any]:
    """The msgspec types of every declaration, each once, in first-seen order."""
    out: list[Any] = []
    for op in operations:
        for declared in (op.request, op.response) if op is not None else ():
            described = declared is not None and not isinstance(declared, Mapping)
            if described and all(t is not declared for t in out):
                out.append(declared)
    return out


def _operation(entry: _Entry, family: WireFamily | None, by_type: Mapping[int, Any], errors: _Errors,
               security: dict[str, dict[str, Any]]) -> dict[str, Any]:
    op = entry.operation
    names = _PARAMETER.findall(entry.path)
    out: dict[str, Any] = {
        "operationId": re.sub(r"[^A-Za-z0-9]+", "_", f"{entry.method} {entry.path}").strip("_").lower(),
        "summary": op.summary if op is not None else entry.route.name.replace("_", " ").capitalize(),
        "tags": [family.name if family is not None else "gateway"],
    }
    notes = [] if op is not None else _first_paragraph(entry.route)
    if names:
        out["parameters"] = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                             for n in names]
    if op is not None and op.public:
        out["security"] = []
    else:
        places = _places(family)
        if places is not None:
            out["security"] = [{_scheme(place, security): []} for place in places]
        if family is not None:
            notes.append(f"The API key goes in {family.credential_hint}.")
    if notes:
        out["description"] = "\n\n".join(notes)
    if op is not None and op.request is not None:
        media_types = (op.media_type,) if isinstance(op.media_type, str) else op.media_type
        body = _schema(op.request, by_type)
        out["requestBody"] = {"required": True, "content": {media: {"schema": body} for media in media_types}}
    success: dict[str, Any] = {"description": "Success"}
    if op is not None and op.response is not None:
        success["content"] = {JSON: {"schema": _schema(op.response, by_type)}}
    if op is not None and op.stream:
        success.setdefault("content", {JSON: {"schema": {}}})[EVENT_STREAM] = {"schema": {"type": "string"}}
    status = str(op.status) if op is not None else "2XX"
    envelope = errors.ref(family)
    out["responses"] = {status: success, "default": {
        "description": "An error, in the envelope of the family that owns the path",
        "content": {JSON: {"schema": envelope}}}}
    return out


def _first_paragraph(route: Route) -> list[str]:
    doc = inspect.getdoc(route.endpoint)
    return [doc.split("\n\n", 1)[0].replace("\n", " ")] if doc else []


def _schema(declared: object, by_type: Mapping[int, Any]) -> Any:
    return dict(declared) if isinstance(declared, Mapping) else by_type[id(declared)]


def _places(family: WireFamily | None) -> tuple[CredentialPlace, ...] | None:
    """Where the key goes: the family's declaration, Bearer where no family owns the path, None
    (unknown) for a family that declares nothing."""
    if family is None:
        return (BEARER,)
    return family.credential_places if isinstance(family, DeclaresCredential) else None


def _scheme(place: CredentialPlace, schemes: dict[str, dict[str, Any]]) -> str:
    """The name of ``place``'s security scheme, added to ``schemes`` on first use."""
    if place.kind == "bearer":
        name, scheme = "bearer", {"type": "http", "scheme": "bearer"}
    else:
        name, scheme = f"{place.kind}.{place.name}", {"type": "apiKey", "in": place.kind, "name": place.name}
    schemes.setdefault(name, scheme)
    return name


class _Errors:
    """One schema component per distinct envelope: the gateway's own, and each family's own when
    it renders another shape."""

    def __init__(self, families: FamilyRegistry, schemas: dict[str, Any]) -> None:
        self._families = families
        self._schemas = schemas
        self._default = describe_errors(render_default_error)
        self._names: dict[str, str] = {}  # family name -> its component

    def ref(self, family: WireFamily | None) -> dict[str, str]:
        name = self._names.get(family.name) if family is not None else GATEWAY_ERROR
        if name is None:
            assert family is not None
            shape = describe_errors(family.render_error)
            name = GATEWAY_ERROR
            if shape != self._default:
                name = f"{family.name}.error"
                self._schemas.setdefault(name, {"title": f"Error ({family.name})", **shape})
            self._names[family.name] = name
        if name == GATEWAY_ERROR:
            self._schemas.setdefault(name, {"title": "Error (the gateway's own)", **self._default})
        return {"$ref": REF_TEMPLATE.format(name=name)}


def describe_errors(render: Callable[[GatewayError], bytes]) -> dict[str, Any]:
    """A JSON Schema of the envelope ``render`` writes, learnt from the errors it renders."""
    return _describe([orjson.loads(render(err)) for err in _ERROR_SAMPLES])


def _describe(values: list[Any]) -> dict[str, Any]:
    kinds = sorted({_json_type(v) for v in values})
    if len(kinds) != 1:
        return {"type": kinds}
    kind = kinds[0]
    if kind == "object":
        keys = list(dict.fromkeys(k for v in values for k in v))
        properties = {k: _describe([v[k] for v in values if k in v]) for k in keys}
        return {"type": "object", "properties": properties,
                "required": [k for k in keys if all(k in v for v in values)]}
    if kind == "array":
        items = [item for v in values for item in v]
        return {"type": "array", "items": _describe(items)} if items else {"type": "array"}
    return {"type": kind}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _version() -> str:
    try:
        return metadata.version("model-gateway")
    except metadata.PackageNotFoundError:
        return "0"
