"""Reading a speech-to-text upload as it streams in: text fields kept, the file spooled and probed.

The file goes to a ``SpooledTemporaryFile`` (memory up to ``SPOOL_MEMORY`` bytes, then disk), never
into one bytes object, and every chunk is fed to the duration probe on the way. It is spooled
rather than piped straight upstream because form fields may follow the file (curl's ``-F`` order):
each of them must be checked before any upstream is called, and a failed upstream attempt must be
able to send the file again to the next one.

``on_file`` runs when the file part begins, with the fields read so far: the route validates them
and reserves there, so a caller without the quota is refused before 25 MB are read. Any error while
reading leaves the rest of the body to ``drain``, so that the client (which sends its whole body
before it reads an answer, as the openai SDK does) gets to read the 4xx.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO

from starlette.requests import Request

from gateway.api import InvalidRequest, RequestTooLarge
from gateway.api.wire import AudioProbe, MultipartReader, PartData, PartEnd, PartStart, boundary_of, form_text
from translators.audio.form import MAX_FIELD_BYTES, check_filename

SPOOL_MEMORY = 1024 * 1024
FILE_FIELD = "file"

OnFile = Callable[[list[tuple[str, str]]], Awaitable[None]]


@dataclass
class Upload:
    fields: list[tuple[str, str]] = field(default_factory=list)
    filename: str | None = None
    content_type: str | None = None
    size: int = 0
    probe: AudioProbe = field(default_factory=AudioProbe)
    spool: IO[bytes] | None = None

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    async def chunks(self, size: int = 64 * 1024) -> AsyncIterator[bytes]:
        """The file from its start (each upstream attempt reads it anew). Spool reads are from
        memory or the page cache: short enough not to need a thread."""
        assert self.spool is not None
        self.spool.seek(0)
        while chunk := self.spool.read(size):
            yield chunk


async def read_upload(request: Request, max_file_bytes: int, on_file: OnFile) -> Upload:
    """The form of ``request``; raises InvalidRequest (malformed, no file, two files, a field too
    long) or RequestTooLarge (the file over ``max_file_bytes``), with the body left unread."""
    reader = MultipartReader(boundary_of(request.headers.get("content-type")))
    upload = Upload()
    current: str | None = None  # the text field being read, or FILE_FIELD
    value = bytearray()
    try:
        async for chunk in request.stream():
            for event in reader.feed(chunk):
                if isinstance(event, PartData):
                    if current == FILE_FIELD:
                        _file_data(upload, event.data, max_file_bytes)
                    else:
                        value += event.data
                        if len(value) > MAX_FIELD_BYTES:
                            raise InvalidRequest(f"The form field `{current}` is longer than "
                                                 f"{MAX_FIELD_BYTES} bytes.", param=current)
                elif isinstance(event, PartStart):
                    current = await _start_part(upload, event, on_file)
                    value.clear()
                elif isinstance(event, PartEnd):
                    if current is not None and current != FILE_FIELD:
                        upload.fields.append((current, form_text(current, value)))
                    current = None
        reader.close()
    except BaseException:
        upload.close()
        raise
    if upload.spool is None:
        raise InvalidRequest("Missing required form field `file`.", param=FILE_FIELD)
    return upload


async def _start_part(upload: Upload, part: PartStart, on_file: OnFile) -> str:
    if part.name != FILE_FIELD:
        return part.name
    if upload.spool is not None:
        raise InvalidRequest("Only one `file` may be uploaded.", param=FILE_FIELD)
    check_filename(part.filename)
    upload.filename, upload.content_type = part.filename, part.content_type
    await on_file(list(upload.fields))
    upload.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # closed by Upload.close
    return FILE_FIELD


def _file_data(upload: Upload, data: bytes, max_file_bytes: int) -> None:
    assert upload.spool is not None
    upload.size += len(data)
    if upload.size > max_file_bytes:
        raise RequestTooLarge(f"The audio file is larger than the limit of {max_file_bytes} bytes.",
                              param=FILE_FIELD)
    upload.probe.feed(data)
    upload.spool.write(data)
