"""A ``multipart/form-data`` body to send upstream: text fields, then files streamed from wherever
the caller keeps them (a spool), never joined into one bytes object.

Its length is known before the first byte (fields, framing and the files' sizes), so the upstream
gets a Content-Length rather than a chunked body, which some OpenAI-compatible servers refuse. Each
call of ``body()`` starts from the beginning (a failover sends the form again).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

__all__ = ["FilePart", "MultipartForm", "multipart_form", "quote_param"]


@dataclass(frozen=True, slots=True)
class FilePart:
    name: str  # the form field
    filename: str
    content_type: str
    size: int  # bytes ``chunks`` yields, counted by the caller as the file arrived
    chunks: Callable[[], AsyncIterator[bytes]]  # the file from its start, on each call


@dataclass(frozen=True, slots=True)
class MultipartForm:
    headers: dict[str, str]  # Content-Type (with the boundary) and Content-Length
    body: Callable[[], AsyncIterator[bytes]]


def quote_param(value: str) -> str:
    """A header parameter value as browsers write it (WHATWG multipart/form-data encoding)."""
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def multipart_form(fields: list[tuple[str, str]], files: list[FilePart]) -> MultipartForm:
    boundary = "gateway-" + secrets.token_hex(16)
    head = bytearray()
    for name, value in fields:
        head += (f'--{boundary}\r\nContent-Disposition: form-data; name="{quote_param(name)}"\r\n\r\n'
                 f"{value}\r\n").encode()
    prefix = bytes(head)
    file_heads = [(f'--{boundary}\r\nContent-Disposition: form-data; name="{quote_param(f.name)}"; '
                   f'filename="{quote_param(f.filename)}"\r\nContent-Type: {quote_param(f.content_type)}'
                   "\r\n\r\n").encode() for f in files]
    tail = f"--{boundary}--\r\n".encode()

    async def body() -> AsyncIterator[bytes]:
        yield prefix
        for file, file_head in zip(files, file_heads, strict=True):
            yield file_head
            async for chunk in file.chunks():
                yield chunk
            yield b"\r\n"
        yield tail

    files_length = sum(len(h) + f.size + 2 for h, f in zip(file_heads, files, strict=True))
    length = len(prefix) + files_length + len(tail)
    return MultipartForm({"Content-Type": f"multipart/form-data; boundary={boundary}",
                          "Content-Length": str(length)}, body)
