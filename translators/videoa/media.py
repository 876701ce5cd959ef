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
* "Public" is judged without DNS (the gateway does not connect there): see
  ``gateway.wire.media_url``.
"""

from __future__ import annotations

import base64
from fractions import Fraction

from gateway.api import InvalidRequest
from gateway.api.wire import AudioProbe, DataURLError, base64_size, parse_data_url, public_url_problem

MAX_INLINE_BYTES = 100 * 1024 * 1024
_PROBE_CHUNK = 4 * 1024 * 1024  # base64 characters decoded per step (a multiple of 4)


def bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}.", param=field)


def probe_seconds(data: str) -> Fraction | None:
    """The duration a container header tells, decoding ``data`` a chunk at a time."""
    probe = AudioProbe()
    for at in range(0, len(data), _PROBE_CHUNK):
        probe.feed(base64.b64decode(data[at:at + _PROBE_CHUNK]))
    return probe.seconds()


def check_media(url: str, field: str, kind: str) -> Fraction | None:
    """Check one media URL of ``kind`` (image, video, audio); the seconds of an inline video or
    audio when its header tells them, else None."""
    try:
        parsed = parse_data_url(url)
    except DataURLError as exc:
        raise bad(field, f"a malformed data URL: {exc}") from exc
    if parsed is None:
        if (problem := public_url_problem(url)) is not None:
            raise bad(field, problem)
        return None
    if not parsed.base64:
        raise bad(field, "a data URL must carry base64 data (`data:<mime>;base64,<data>`)")
    if not parsed.explicit_type or parsed.media_type.split("/", 1)[0] != kind:
        raise bad(field, f"expected a {kind}/* data URL, got `{parsed.media_type}`")
    size = base64_size(parsed.data)
    if size == 0:
        raise bad(field, "the data URL is empty")
    if size > MAX_INLINE_BYTES:
        raise bad(field, f"an inline asset is at most 100 MB ({MAX_INLINE_BYTES} bytes); this one "
                         f"is {size} bytes")
    if kind == "image":
        return None
    return probe_seconds(parsed.data)
