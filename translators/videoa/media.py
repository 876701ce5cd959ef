"""Media URLs of a video-A submission (spec 4.10 rule 1, spec 8): a public http(s) URL, or a
``data:<mime>;base64,<data>`` URL parsed by the core's one parser (``gateway.wire.data_url``).

* An inline asset is at most 100 MB once decoded (its base64 text is about a third longer; the
  whole body is bounded by ``limits.video_submit_bytes`` while it is read). Its media type must
  match the list it is in (``image/*`` in ``image_urls``...).
* The seconds of an inline video or audio are read from its container header with the core's
  ``AudioProbe`` (mp4/mov ``mvhd``, wav, mp3, webm), decoding the base64 a few MB at a time, so the
  per-item and combined limits of spec 8 are enforced before anything is reserved.
* A remote URL's seconds cannot be known without fetching it, and the gateway never fetches a
  client's URL (that would let a client make the gateway's network reach anywhere, and would add
  the download's time to every submission): remote media count towards the material counts, and
  their seconds are left to the upstream, which fetches them anyway and refuses what breaks its
  limits (the refusal reaches the client, and nothing is charged). An inline file whose header
  tells no duration is treated the same way.
* "Public" is judged without DNS (the gateway does not connect there): an IP literal must be a
  global address, and ``localhost`` and the ``.local``/``.internal`` names are refused.
"""

from __future__ import annotations

import base64
import ipaddress
from fractions import Fraction
from urllib.parse import urlsplit

from gateway.errors import InvalidRequest
from gateway.wire.audio_duration import AudioProbe
from gateway.wire.data_url import DataURLError, parse_data_url

MAX_INLINE_BYTES = 100 * 1024 * 1024
MAX_URL_CHARS = 8192
_PROBE_CHUNK = 4 * 1024 * 1024  # base64 characters decoded per step (a multiple of 4)
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")


def bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}.", param=field)


def decoded_size(data: str) -> int:
    """Bytes of standard padded base64 text, without decoding it."""
    return len(data) // 4 * 3 - (len(data) - len(data.rstrip("=")))


def probe_seconds(data: str) -> Fraction | None:
    """The duration a container header tells, decoding ``data`` a chunk at a time."""
    probe = AudioProbe()
    for at in range(0, len(data), _PROBE_CHUNK):
        probe.feed(base64.b64decode(data[at:at + _PROBE_CHUNK]))
    return probe.seconds()


def _check_public(url: str, field: str) -> None:
    if len(url) > MAX_URL_CHARS:
        raise bad(field, f"a URL of at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError as exc:
        raise bad(field, "not a valid URL") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise bad(field, "expected a public http(s) URL or a data URL `data:<mime>;base64,<data>`")
    if parts.username is not None or parts.password is not None:
        raise bad(field, "a URL may not carry credentials")
    host = parts.hostname.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(_PRIVATE_SUFFIXES) or "." not in host:
            raise bad(field, f"`{host}` is not a public host") from None
        return
    if not address.is_global or address.is_multicast:
        raise bad(field, f"{address} is not a public address")


def check_media(url: str, field: str, kind: str) -> Fraction | None:
    """Check one media URL of ``kind`` (image, video, audio); the seconds of an inline video or
    audio when its header tells them, else None."""
    try:
        parsed = parse_data_url(url)
    except DataURLError as exc:
        raise bad(field, f"a malformed data URL: {exc}") from exc
    if parsed is None:
        _check_public(url, field)
        return None
    if not parsed.base64:
        raise bad(field, "a data URL must carry base64 data (`data:<mime>;base64,<data>`)")
    if not parsed.explicit_type or parsed.media_type.split("/", 1)[0] != kind:
        raise bad(field, f"expected a {kind}/* data URL, got `{parsed.media_type}`")
    size = decoded_size(parsed.data)
    if size == 0:
        raise bad(field, "the data URL is empty")
    if size > MAX_INLINE_BYTES:
        raise bad(field, f"an inline asset is at most 100 MB ({MAX_INLINE_BYTES} bytes); this one "
                         f"is {size} bytes")
    if kind == "image":
        return None
    return probe_seconds(parsed.data)
