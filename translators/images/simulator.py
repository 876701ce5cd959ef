"""The simulator's side of the Images API (OpenAI wire), so the family runs offline.

* ``POST /v1/images/generations`` (JSON) and ``/v1/images/edits`` (multipart, read with the
  gateway's own incremental reader): ``n`` images (default 1), each a small PNG whose colour comes
  from the prompt and its index, as ``b64_json`` or as a ``url`` this side serves
  (``GET /_sim_images/{name}.png``). A prompt containing ``[[images:K]]`` makes the side return K
  images whatever ``n`` says (to test settling on what came back). An edit's ``revised_prompt``
  says what arrived: how many images, their bytes, and whether a mask came.
* Fault options (``fail<N>``, ``hang``, ``ttft``...) come from the upstream key and the model, as
  on every side.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import time
import zlib
from typing import Any

from aiohttp import web

from gateway.api import InvalidRequest
from gateway.api.wire import MultipartReader, PartData, PartEnd, PartStart, boundary_of
from gateway_simulator.toolkit import (
    BadRequest,
    Ctx,
    Faults,
    SimVendor,
    add_route,
    endpoint,
    hookimpl,
    json_response,
)

_COUNT = re.compile(r"\[\[images:(\d{1,2})\]\]")
_NAME = re.compile(r"^[0-9a-f]{6}$")
_SIDE = 8  # pixels: enough to be a real PNG, small enough to make per image


class ImagesSide(SimVendor):
    name = "openai-images"

    def error_body(self, status: int, message: str) -> Any:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}


VENDOR = ImagesSide()


def png(rgb: bytes) -> bytes:
    """An 8x8 PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + rgb * _SIDE for _ in range(_SIDE))
    header = struct.pack(">IIBBBBB", _SIDE, _SIDE, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def _images(request: web.Request, prompt: str, n: int, response_format: str,
            revised: str | None) -> dict[str, Any]:
    wanted = _COUNT.search(prompt)
    count = int(wanted.group(1)) if wanted else n
    data: list[dict[str, Any]] = []
    for index in range(count):
        colour = hashlib.sha256(f"{prompt}\x00{index}".encode()).hexdigest()[:6]
        item: dict[str, Any] = ({"b64_json": base64.b64encode(png(bytes.fromhex(colour))).decode()}
                                if response_format == "b64_json"
                                else {"url": f"{request.scheme}://{request.host}/_sim_images/{colour}.png"})
        if revised is not None:
            item["revised_prompt"] = revised
        data.append(item)
    return {"created": int(time.time()), "data": data}


def _count(value: Any) -> int:
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10:
        raise BadRequest("n: must be an integer between 1 and 10")
    return value


async def generations(ctx: Ctx) -> web.StreamResponse:
    prompt = ctx.body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("prompt: required")
    fmt = ctx.body.get("response_format") or "url"
    if fmt not in ("url", "b64_json"):
        raise BadRequest(f"response_format: unsupported {fmt!r}")
    return await ctx.respond(_images(ctx.request, prompt, _count(ctx.body.get("n")), fmt, None))


def _error(status: int, message: str) -> web.Response:
    return json_response(VENDOR.error_body(status, message), status=status)


async def _read_form(request: web.Request) -> tuple[dict[str, str], list[int], bool]:
    """The text fields, the sizes of the images, whether a mask came."""
    fields: dict[str, str] = {}
    sizes: list[int] = []
    mask = False
    reader = MultipartReader(boundary_of(request.headers.get("Content-Type")))
    current: str | None = None
    value = bytearray()
    for event in reader.feed(await request.read()):
        if isinstance(event, PartStart):
            current, value = event.name, bytearray()
            if current in ("image", "image[]"):
                sizes.append(0)
            mask = mask or current == "mask"
        elif isinstance(event, PartData):
            if current in ("image", "image[]"):
                sizes[-1] += len(event.data)
            elif current != "mask":
                value += event.data
        elif isinstance(event, PartEnd) and current not in (None, "image", "image[]", "mask"):
            assert current is not None
            fields[current] = value.decode("utf-8", "replace")
    reader.close()
    return fields, sizes, mask


async def edits(request: web.Request) -> web.StreamResponse:
    key = VENDOR.extract_key(request)
    if not key:
        return _error(401, "missing API key (simulator accepts any non-empty key)")
    try:
        fields, sizes, mask = await _read_form(request)
    except InvalidRequest as exc:
        return _error(400, f"malformed multipart body: {exc.message}")
    model = fields.get("model", "")
    faults = Faults.parse(key, model)
    if faults.fail is not None:
        return _error(faults.fail, "simulated failure")
    if not model or not fields.get("prompt"):
        return _error(400, "model and prompt: required")
    if not sizes:
        return _error(400, "image: required")
    try:
        n = int(fields.get("n", "1"))
    except ValueError:
        return _error(400, "n: must be an integer")
    revised = (f"edited {len(sizes)} image(s) of {'+'.join(map(str, sizes))} bytes"
               f"{' with a mask' if mask else ''}: {fields['prompt']}")
    fmt = fields.get("response_format") or "url"
    return json_response(_images(request, fields["prompt"], n, fmt, revised))


async def image_file(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if not _NAME.match(name):
        raise web.HTTPNotFound()
    return web.Response(body=png(bytes.fromhex(name)), content_type="image/png")


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    add_route(app, "POST", "/v1/images/generations", endpoint(VENDOR, generations))
    add_route(app, "POST", "/v1/images/edits", edits)
    add_route(app, "GET", "/_sim_images/{name}.png", image_file)
