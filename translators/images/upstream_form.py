"""An edit as it goes upstream: the text fields (the model under the upstream's id), then the files
streamed from their spools, in the order they came.

Its length is known before the first byte (fields, framing and the files' sizes), so the upstream
gets a Content-Length rather than a chunked body, which some OpenAI-compatible servers refuse.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

from gateway.api import InvalidRequest, UpstreamCall
from translators.images.fields import ImageParams, check_params, form_bool, form_int
from translators.images.upload import EditUpload

_ACTED_ON = ("model", "prompt", "n", "response_format", "size", "stream")


def parse_edit_fields(upload: EditUpload) -> ImageParams:
    """The edit's parameters from its text fields (a field the gateway acts on given twice: 400)."""
    seen: dict[str, str] = {}
    for name, value in upload.fields:
        if name in _ACTED_ON:
            if name in seen:
                raise InvalidRequest(f"Invalid value for `{name}`: the field is given more than once.",
                                     param=name)
            seen[name] = value
    return check_params(model=seen.get("model"), prompt=seen.get("prompt"), n=form_int("n", seen.get("n")),
                        response_format=seen.get("response_format"), size=seen.get("size"),
                        stream=form_bool("stream", seen.get("stream")))


def _quote(value: str) -> str:
    """A header parameter value as browsers write it (WHATWG multipart/form-data encoding)."""
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def build_edit_call(path: str, upload: EditUpload, upstream_model: str) -> UpstreamCall:
    boundary = "gateway-" + secrets.token_hex(16)
    fields = [(name, upstream_model if name == "model" else value) for name, value in upload.fields]
    head = bytearray()
    for name, value in fields:
        head += (f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'
                 f"{value}\r\n").encode()
    heads: list[bytes] = []
    for file in upload.files:
        content_type = file.content_type or "application/octet-stream"
        heads.append((f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(file.name)}"; '
                      f'filename="{_quote(file.filename)}"\r\nContent-Type: {_quote(content_type)}\r\n\r\n')
                     .encode())
    tail = f"--{boundary}--\r\n".encode()
    prefix = bytes(head)
    files = list(upload.files)

    async def body() -> AsyncIterator[bytes]:
        yield prefix
        for file, file_head in zip(files, heads, strict=True):
            yield file_head
            async for chunk in file.chunks():
                yield chunk
            yield b"\r\n"
        yield tail

    length = len(prefix) + sum(len(h) + f.size + 2 for h, f in zip(heads, files, strict=True)) + len(tail)
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(length)}
    return UpstreamCall(path=path, body=body(), headers=headers)
