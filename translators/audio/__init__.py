"""The audio family (OpenAI wire): speech to text (spec 4.6) and text to speech, both sides.

Modules, one job each:

* ``family``: the ``WireFamily`` (paths, Bearer key, OpenAI envelope, the upload body limit);
* ``form``: the transcription form's fields validated (400 naming each); ``upload``: the multipart
  upload read as it streams (fields kept, the file spooled and its duration probed);
* ``upstream_form``: the multipart body relayed upstream, the file streamed from its spool;
* ``billing``: per-minute (transcription) and per-character (speech) charges;
* ``transcribe``: ``/v1/audio/transcriptions`` and ``/translations``; ``speech``: ``/v1/audio/speech``;
* ``routes``: the endpoints; ``simulator``: the upstream side in the built-in simulator.

Audio is served by upstreams of the ``chat`` protocol (OpenAI-compatible servers expose
``/v1/audio/...`` beside ``/v1/chat/completions``), with the chat adapter's credential headers
through the core's upstream pool; this package imports no other translator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.audio.family import WIRE_FAMILY

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, WireFamily


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.audio.routes import routes

    return routes()
