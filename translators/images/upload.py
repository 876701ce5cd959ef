"""An edit's ``multipart/form-data`` body read as it streams: text fields kept, images spooled.

Each file goes to a ``SpooledTemporaryFile`` (memory up to ``SPOOL_MEMORY`` bytes, then disk), never
into one bytes object: the whole body is read before any upstream is called because fields may
follow the files and each must be checked first, and a failed attempt sends the files again to the
next upstream. The body as a whole is bounded by the family's body limit (the JSON limit).

Files: ``image`` (the openai SDK's name for one image), ``image[]`` (its name for each of a list)
and ``mask``; each must be a PNG, JPEG or WebP by its magic bytes, so a renamed PDF is refused
before any upstream sees it. An error while reading leaves the rest of the body to ``drain``: the
openai SDK sends its whole body before it reads the answer.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO

from starlette.requests import Request

from gateway.api import InvalidRequest
from gateway.api.wire import MultipartReader, PartData, PartEnd, PartStart, boundary_of, form_text

SPOOL_MEMORY = 1024 * 1024
MAX_FIELD_BYTES = 128 * 1024  # a prompt of 32,000 characters in UTF-8, with room
MAX_IMAGES = 16  # the OpenAI Images API's bound on input images of one edit
IMAGE_FIELDS = ("image", "image[]")
MASK_FIELD = "mask"
FILE_FIELDS = frozenset({*IMAGE_FIELDS, MASK_FIELD})
_SNIFF_BYTES = 12


def image_type(head: bytes) -> str | None:
    """The image type the first bytes of a file say, among those accepted."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


@dataclass
class UploadedFile:
    name: str  # the form field (image, image[], mask)
    filename: str
    content_type: str | None
    spool: IO[bytes]
    size: int = 0
    head: bytearray = field(default_factory=bytearray)  # the first bytes, for the type check

    async def chunks(self, size: int = 64 * 1024) -> AsyncIterator[bytes]:
        """The file from its start (each upstream attempt reads it anew). Spool reads are from
        memory or the page cache: short enough not to need a thread."""
        self.spool.seek(0)
        while chunk := self.spool.read(size):
            yield chunk


@dataclass
class EditUpload:
    fields: list[tuple[str, str]] = field(default_factory=list)
    files: list[UploadedFile] = field(default_factory=list)

    def close(self) -> None:
        for file in self.files:
            file.spool.close()
        self.files.clear()


async def read_edit_form(request: Request) -> EditUpload:
    """The form of ``request``; InvalidRequest names what is wrong (a malformed body, a field too
    long, an unknown or repeated file, a file that is no image)."""
    reader = MultipartReader(boundary_of(request.headers.get("content-type")))
    upload = EditUpload()
    current: str | None = None  # the text field being read
    file: UploadedFile | None = None  # the file being read
    value = bytearray()
    try:
        async for chunk in request.stream():
            for event in reader.feed(chunk):
                if isinstance(event, PartData):
                    if file is not None:
                        _file_data(file, event.data)
                    else:
                        value += event.data
                        if len(value) > MAX_FIELD_BYTES:
                            raise InvalidRequest(f"The form field `{current}` is longer than "
                                                 f"{MAX_FIELD_BYTES} bytes.", param=current)
                elif isinstance(event, PartStart):
                    value.clear()
                    current, file = event.name, _start_file(upload, event)
                elif isinstance(event, PartEnd):
                    if file is not None:
                        _check_image(file)
                    elif current is not None:
                        upload.fields.append((current, form_text(current, value)))
                    current, file = None, None
        reader.close()
    except BaseException:
        upload.close()
        raise
    if not any(f.name in IMAGE_FIELDS for f in upload.files):
        upload.close()
        raise InvalidRequest("Missing required form field `image`.", param="image")
    return upload


def _start_file(upload: EditUpload, part: PartStart) -> UploadedFile | None:
    """A file part's spool, or None for a text field."""
    if part.filename is None:
        if part.name in FILE_FIELDS:
            raise InvalidRequest(f"The `{part.name}` field must be a file upload (a part with a filename).",
                                 param=part.name)
        return None
    if part.name not in FILE_FIELDS:
        raise InvalidRequest(f"Unknown file field `{part.name}`: files go in `image` (or `image[]`) "
                             "and `mask`.", param=part.name)
    images = sum(f.name in IMAGE_FIELDS for f in upload.files)
    if part.name in IMAGE_FIELDS and images >= MAX_IMAGES:
        raise InvalidRequest(f"Invalid value for `image`: at most {MAX_IMAGES} images.", param="image")
    if part.name == MASK_FIELD and any(f.name == MASK_FIELD for f in upload.files):
        raise InvalidRequest("Only one `mask` may be uploaded.", param=MASK_FIELD)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # closed by EditUpload.close
    file = UploadedFile(part.name, part.filename or "image", part.content_type, spool)
    upload.files.append(file)
    return file


def _file_data(file: UploadedFile, data: bytes) -> None:
    file.size += len(data)
    if len(file.head) < _SNIFF_BYTES:
        file.head += data[:_SNIFF_BYTES - len(file.head)]
    file.spool.write(data)


def _check_image(file: UploadedFile) -> None:
    field_name = "image" if file.name in IMAGE_FIELDS else file.name
    if file.size == 0:
        raise InvalidRequest(f"Invalid value for `{field_name}`: the file is empty.", param=field_name)
    if image_type(bytes(file.head)) is None:
        raise InvalidRequest(f"Invalid value for `{field_name}`: the file is not a PNG, JPEG or WebP image.",
                             param=field_name)
