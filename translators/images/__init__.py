"""The Images family (OpenAI wire, CONTRACT 8): ``POST /v1/images/generations`` (JSON) and
``/v1/images/edits`` (multipart), both sides.

Modules, one job each:

* ``family``: the ``WireFamily`` (paths, Bearer key, OpenAI envelope);
* ``fields``: the fields both endpoints share (model, prompt, n, size, response_format...), each
  bad one a 400 naming it; ``generation``: the JSON body of a generation;
* ``upload``: an edit's multipart form read as it streams (text fields kept, images spooled and
  their type checked by magic bytes); ``upstream_form``: that form relayed upstream;
* ``serve``: a call's money and relay (reserve ``per_image`` times ``n``, settle on the images that
  came back); ``routes``: the endpoints; ``simulator``: the upstream side in the built-in simulator.

Images are served by upstreams of the ``chat`` protocol at the same paths, with the chat adapter's
credential headers through the core's upstream pool; this package imports no other translator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.images.family import WIRE_FAMILY

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, WireFamily


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.images.routes import routes

    return routes()
