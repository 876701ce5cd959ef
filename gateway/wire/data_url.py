"""``data:`` URLs (RFC 2397), parsed once for every family.

    dataurl   := "data:" [ mediatype ] [ ";base64" ] "," data
    mediatype := [ type "/" subtype ] *( ";" parameter )

* The scheme and the media type are case-insensitive; the media type is optional and defaults to
  ``text/plain;charset=US-ASCII`` (``explicit_type`` tells whether the URL named one, so that a
  caller may prefer its own default for, say, an image).
* ``;base64`` marks base64 data; otherwise the data is percent-encoded octets. Either way
  ``DataURL.data`` is the content as standard, padded base64 text, which is what every wire
  family carries inline, so the common case (a well-formed base64 payload) costs one slice and
  one scan of the payload, and is never decoded.
* Base64 data may itself be percent-encoded (``%2B``) or wrapped with whitespace; both are
  accepted, and missing ``=`` padding is restored. Anything outside the base64 alphabet, an
  impossible length, a malformed media type or a missing comma raises ``DataURLError``.
* Parameters (``charset=utf-8``, quoted or percent-encoded values) are kept, in order, with
  lower-cased names. A parameter without ``=`` is ignored, as browsers do.
"""

from __future__ import annotations

import base64 as b64
import re
from urllib.parse import unquote, unquote_to_bytes

import msgspec

DEFAULT_MEDIA_TYPE = "text/plain"
DEFAULT_PARAMETERS = (("charset", "US-ASCII"),)

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SPACE = re.compile(r"[\t\n\f\r ]+")


class DataURLError(ValueError):
    """A ``data:`` URL that breaks RFC 2397 (the message says how)."""


class DataURL(msgspec.Struct, frozen=True):
    media_type: str  # "type/subtype", lower case
    data: str  # the content, standard padded base64
    parameters: tuple[tuple[str, str], ...] = ()
    explicit_type: bool = True  # False when the URL named no media type (the RFC default applies)
    base64: bool = True  # the URL carried base64 (else percent-encoded octets)

    def content(self) -> bytes:
        return b64.b64decode(self.data)

    def parameter(self, name: str) -> str | None:
        name = name.lower()
        return next((value for key, value in self.parameters if key == name), None)


def is_data_url(url: str) -> bool:
    return url[:5].lower() == "data:"


def parse_data_url(url: str) -> DataURL | None:
    """The parsed URL; None when ``url`` is not a ``data:`` URL at all; DataURLError when it is one
    but malformed."""
    if not is_data_url(url):
        return None
    comma = url.find(",", 5)
    if comma < 0:
        raise DataURLError("a data URL needs a comma before its data.")
    header = url[5:comma]
    is_base64 = False
    pieces = header.split(";")
    if len(pieces) > 1 and pieces[-1].strip().lower() == "base64":
        is_base64 = True
        pieces.pop()
    media_type = pieces[0].strip().lower()
    explicit = bool(media_type)
    if explicit and not _MEDIA_TYPE.fullmatch(media_type):
        raise DataURLError(f"{pieces[0].strip()!r} is not a media type (type/subtype).")
    parameters = tuple(_parameter(p) for p in pieces[1:] if "=" in p)
    if not explicit:
        media_type = DEFAULT_MEDIA_TYPE
        parameters = parameters or DEFAULT_PARAMETERS
    payload = url[comma + 1:]
    data = _base64_text(payload) if is_base64 else b64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    return DataURL(media_type=media_type, data=data, parameters=parameters, explicit_type=explicit,
                   base64=is_base64)


def _parameter(piece: str) -> tuple[str, str]:
    name, _, value = piece.partition("=")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return name.strip().lower(), unquote(value)


def _base64_text(payload: str) -> str:
    if _BASE64.fullmatch(payload) and len(payload) % 4 == 0:
        return payload  # the common case: as given, no copy, no decode
    text = unquote(payload) if "%" in payload else payload
    text = _SPACE.sub("", text)
    if not _BASE64.fullmatch(text):
        raise DataURLError("the data is not base64 (only A-Z, a-z, 0-9, +, / and = padding).")
    bare = len(text.rstrip("="))
    if bare % 4 == 1:
        raise DataURLError("the base64 data has an impossible length (a character too many or few).")
    if len(text) % 4:
        if text.endswith("="):
            raise DataURLError("the base64 data is wrongly padded.")
        text += "=" * (-len(text) % 4)
    return text


def data_url(media_type: str | None, data: str, default: str = "application/octet-stream") -> str:
    """A base64 ``data:`` URL for ``data`` (base64 text) of ``media_type``."""
    return f"data:{media_type or default};base64,{data}"


def inline_data(url: str) -> DataURL | None:
    """For an upstream adapter holding a canonical part's URL: the data URL's content to send
    inline, or None to send ``url`` as a link (not a data URL, or a malformed one, which the
    upstream judges: the client's own family already accepted it)."""
    try:
        return parse_data_url(url)
    except DataURLError:
        return None
