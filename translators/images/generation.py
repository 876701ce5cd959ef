"""``POST /v1/images/generations``: the JSON body, validated (``fields``) and relayed upstream with
the model under the id the upstream knows it by; every other member is relayed as it came."""

from __future__ import annotations

import msgspec

from gateway.api import decode_body
from translators.images.fields import ImageParams, check_params


class GenerationView(msgspec.Struct):
    """The members the gateway acts on (unknown ones are allowed: they are relayed)."""

    model: str | None = None
    prompt: str | None = None
    n: int | None = None
    response_format: str | None = None
    size: str | None = None
    stream: bool | None = None


_encode = msgspec.json.Encoder()


def parse_generation(body: bytes) -> tuple[ImageParams, dict[str, msgspec.Raw]]:
    """The call's parameters and the body's members (kept undecoded, to relay)."""
    members = decode_body(body, dict[str, msgspec.Raw])  # not an object: a 400 saying so
    view = decode_body(body, GenerationView)
    params = check_params(model=view.model, prompt=view.prompt, n=view.n,
                          response_format=view.response_format, size=view.size, stream=view.stream)
    return params, members


def upstream_body(members: dict[str, msgspec.Raw], upstream_model: str) -> bytes:
    relayed: dict[str, msgspec.Raw | str] = {**members, "model": upstream_model}
    return _encode.encode(relayed)
