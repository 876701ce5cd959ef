"""The multipart body sent upstream: the validated fields, then the file streamed from its spool.

Its length is known before the first byte (fields, framing and the file's size), so the upstream
gets a Content-Length rather than a chunked body, which some OpenAI-compatible servers refuse.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

from gateway.api import UpstreamCall
from translators.audio.upload import Upload


def _quote(value: str) -> str:
    """A header parameter value as browsers write it (WHATWG multipart/form-data encoding)."""
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def build_upload_call(path: str, fields: list[tuple[str, str]], upload: Upload) -> UpstreamCall:
    boundary = "gateway-" + secrets.token_hex(16)
    head = bytearray()
    for name, value in fields:
        head += (f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'
                 f"{value}\r\n").encode()
    filename = _quote(upload.filename or "audio")
    content_type = upload.content_type or "application/octet-stream"
    head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
             f"Content-Type: {_quote(content_type)}\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    prefix = bytes(head)

    async def body() -> AsyncIterator[bytes]:
        yield prefix
        async for chunk in upload.chunks():
            yield chunk
        yield tail

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}",
               "Content-Length": str(len(prefix) + upload.size + len(tail))}
    return UpstreamCall(path=path, body=body(), headers=headers)
