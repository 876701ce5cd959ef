"""An incremental ``multipart/form-data`` reader: bytes of any chunking in, part events out.

Upload endpoints (speech to text, media submissions) must never hold a whole upload in memory, so
the body is parsed as it arrives: ``MultipartReader.feed`` turns each received chunk into events
(``PartStart`` with the part's name, filename and content type, ``PartData`` slices, ``PartEnd``)
and the caller decides what to keep (a small text field) and what to pass on (a file's bytes).

The byte-level state machine is python-multipart's streaming parser (it handles a boundary split
over any number of chunks); this module adds what a gateway needs on top: limits on hostile input
(parts, header size and count, a part without a name) and every malformation as a 400
``InvalidRequest``, never an exception of the parser's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from gateway.runtime.errors import InvalidRequest

__all__ = ["MultipartReader", "PartData", "PartEnd", "PartEvent", "PartStart", "boundary_of"]

MAX_PARTS = 64  # form fields plus files in one body
MAX_HEADER_BYTES = 4096  # one header line of a part
MAX_HEADERS = 8  # header lines per part
MAX_PREAMBLE = 4096  # bytes before the first boundary (RFC 2046 allows a preamble; clients rarely send one)


@dataclass(frozen=True, slots=True)
class PartStart:
    name: str
    filename: str | None  # present for file parts (may be "" when the client sent no name)
    content_type: str | None


@dataclass(frozen=True, slots=True)
class PartData:
    data: bytes


@dataclass(frozen=True, slots=True)
class PartEnd:
    pass


PartEvent = PartStart | PartData | PartEnd
_PART_END = PartEnd()


def boundary_of(content_type: str | None) -> bytes:
    """The boundary of a ``multipart/form-data`` Content-Type; InvalidRequest otherwise."""
    if not content_type:
        raise InvalidRequest("This endpoint takes a multipart/form-data body; Content-Type is missing.")
    kind, options = parse_options_header(content_type)
    if kind.lower() != b"multipart/form-data":
        raise InvalidRequest("This endpoint takes a multipart/form-data body, not "
                             f"{kind.decode('latin-1', 'replace')!r}.")
    boundary = options.get(b"boundary", b"")
    if not 1 <= len(boundary) <= 70:  # RFC 2046 section 5.1.1
        raise InvalidRequest("The multipart/form-data Content-Type needs a boundary of 1 to 70 characters.")
    return boundary


class MultipartReader:
    """Feed the body's chunks in order, then ``close``. Not thread-safe; one per request."""

    def __init__(self, boundary: bytes, *, max_parts: int = MAX_PARTS) -> None:
        self._events: list[PartEvent] = []
        self._max_parts = max_parts
        self._parts = 0
        self._field = bytearray()
        self._value = bytearray()
        self._headers: dict[str, str] = {}
        self._ended = False
        self._delimiter = b"--" + boundary
        self._preamble: bytearray | None = bytearray()  # None once the first boundary was found
        self._parser = MultipartParser(boundary, {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        })

    @property
    def ended(self) -> bool:
        """True once the closing boundary was read."""
        return self._ended

    def feed(self, chunk: bytes) -> list[PartEvent]:
        """The events that ``chunk`` completes (data slices are copies: the chunk may be reused)."""
        if self._ended:
            return []  # the epilogue after the closing boundary is ignored (RFC 2046)
        if self._preamble is not None:
            chunk = self._skip_preamble(chunk)
            if not chunk:
                return []
        try:
            self._parser.write(chunk)
        except FormParserError as exc:
            raise InvalidRequest(f"The multipart body is malformed: {exc}") from exc
        events, self._events = self._events, []
        return events

    def _skip_preamble(self, chunk: bytes) -> bytes:
        """Bytes from the first boundary line on ("" while it has not come yet)."""
        assert self._preamble is not None
        self._preamble += chunk
        data = bytes(self._preamble)
        if data.startswith(self._delimiter):
            at = 0
        else:
            found = data.find(b"\r\n" + self._delimiter)
            at = found + 2 if found >= 0 else -1
        if at < 0:
            if len(data) > MAX_PREAMBLE + len(self._delimiter) + 2:
                raise InvalidRequest("The multipart body does not start with its boundary.")
            return b""
        self._preamble = None
        return data[at:]

    def close(self) -> None:
        """The body ended: InvalidRequest unless the closing boundary was seen."""
        if not self._ended:
            raise InvalidRequest("The multipart body ended before its closing boundary.")

    # --- parser callbacks ---------------------------------------------------------------------------

    def _part_begin(self) -> None:
        self._parts += 1
        if self._parts > self._max_parts:
            raise InvalidRequest(f"The multipart body has more than {self._max_parts} parts.")
        self._headers = {}

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]
        self._check_header_size()

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]
        self._check_header_size()

    def _check_header_size(self) -> None:
        # Checked here rather than left to the parser's own limits, which not every version has.
        if len(self._field) + len(self._value) > MAX_HEADER_BYTES:
            raise InvalidRequest(f"A multipart part has a header line over {MAX_HEADER_BYTES} bytes.")

    def _header_end(self) -> None:
        if len(self._headers) >= MAX_HEADERS:
            raise InvalidRequest(f"A multipart part has more than {MAX_HEADERS} header lines.")
        name = bytes(self._field).decode("latin-1").strip().lower()
        self._headers[name] = bytes(self._value).decode("utf-8", "replace").strip()
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        disposition = self._headers.get("content-disposition")
        if disposition is None:
            raise InvalidRequest("A multipart part has no Content-Disposition header.")
        kind, options = parse_options_header(disposition)
        name = options.get(b"name")
        if kind.lower() != b"form-data" or not name:
            raise InvalidRequest("A multipart part is not a named form-data field.")
        filename = options.get(b"filename")
        self._events.append(PartStart(
            name=name.decode("utf-8", "replace"),
            filename=filename.decode("utf-8", "replace") if filename is not None else None,
            content_type=self._headers.get("content-type")))

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if end > start:
            self._events.append(PartData(bytes(data[start:end])))

    def _part_end(self) -> None:
        self._events.append(_PART_END)

    def _end(self) -> None:
        self._ended = True


def form_text(name: str, value: bytearray) -> str:
    """A text form field's value; a 400 naming the field when it is not UTF-8."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"The form field `{name}` is not valid UTF-8.", param=name) from None
