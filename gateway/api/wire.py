"""The wire helpers a family reuses rather than rewrites: one implementation of each.

SSE (``SSEParser`` for upstream streams; ``EventBlocks``, ``split_events``, ``event_data`` on the
fast path), frames of a framing of one's own held under a limit (``FrameBuffer``), bodies decoded
into Structs with 400s naming the field (``decode``), ``data:`` URLs, streamed multipart uploads
(read as they arrive, and sent upstream from a spool), media URL checks and audio durations.
"""

from __future__ import annotations

from gateway.wire.audio_duration import AudioProbe, fallback_seconds, upper_bound_seconds
from gateway.wire.data_url import DataURL, DataURLError, data_url, inline_data, parse_data_url
from gateway.wire.decode import DECODE_FAULTS, decode, decode_body, field_error
from gateway.wire.frames import MAX_FRAME_BYTES, FrameBuffer, FrameTooLarge
from gateway.wire.media_url import base64_size, public_url_problem
from gateway.wire.multipart import MultipartReader, PartData, PartEnd, PartStart, boundary_of, form_text
from gateway.wire.multipart_form import FilePart, MultipartForm, multipart_form
from gateway.wire.sse import EventBlocks, SSEEvent, SSEParser, event_data, split_events

__all__ = [
    "DECODE_FAULTS",
    "MAX_FRAME_BYTES",
    "AudioProbe",
    "DataURL",
    "DataURLError",
    "EventBlocks",
    "FilePart",
    "FrameBuffer",
    "FrameTooLarge",
    "MultipartForm",
    "MultipartReader",
    "PartData",
    "PartEnd",
    "PartStart",
    "SSEEvent",
    "SSEParser",
    "base64_size",
    "boundary_of",
    "data_url",
    "decode",
    "decode_body",
    "event_data",
    "fallback_seconds",
    "field_error",
    "form_text",
    "inline_data",
    "multipart_form",
    "parse_data_url",
    "public_url_problem",
    "split_events",
    "upper_bound_seconds",
]
