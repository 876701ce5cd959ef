"""Everything a plugin needs to add a side to the upstream simulator (built-in sides use it too).

Write a side in four steps:

1. Subclass ``SimVendor``: ``error_body(status, message)`` returns the API's error envelope;
   override ``extract_key(request)`` when the credential is not an ``Authorization: Bearer``
   token, ``check_headers(request)`` to demand a header (return the 400 message), and
   ``stamp(request, response)`` to add the API's own response headers.
2. Write handlers ``async def handler(ctx: Ctx) -> web.StreamResponse``. ``ctx.body`` is the parsed
   JSON object (POST), ``ctx.model`` the model id, ``ctx.request`` the aiohttp request. Answer
   with ``await ctx.respond(payload, tokens)``; stream with ``await ctx.start_stream(content_type)``,
   ``await ctx.send(chunk)`` per content chunk (``content=False`` for framing that is not a token)
   and ``return ctx.stream()``; raise ``BadRequest("field: why")`` for a 400; ``ctx.error(status,
   message)`` for any other error; honour ``ctx.usage`` (false under the ``nousage`` fault).
   Using these gives the side every fault option (``ttft``, ``tok``, ``cut``, ``fail``, ``hang``,
   ``nousage``; see ``gateway_simulator.context``) and the latency settings for free.
3. Register them from the hook, with ``endpoint`` around each handler (pass ``model_of`` when the
   model id is in the path rather than in the body's ``model``). ``hookimpl`` is this toolkit's
   (the simulator's own plugin system, ``gateway_simulator.sides``: the module is loaded only by
   the simulator, from ``BUILTIN_SIDES`` or a ``gateway_simulator`` entry point)::

       @hookimpl
       def gateway_simulator_routes(app: web.Application) -> None:
           add_route(app, "POST", "/things", endpoint(MY_VENDOR, create_thing))

   A path another side serves too is shared with ``claims=predicate`` (see
   ``gateway_simulator.routing``).
4. Deterministic text, token counts, tool arguments and embeddings come from
   ``gateway_simulator.textgen`` (``textgen.generate``, ``textgen.count_tokens``, ``textgen.embed``),
   so every side answers the same prompt with the same words and counts tokens alike.

A task side (media families) reads its options with ``option_words(side, request, prompt)``: the
upstream credential's ``-`` pieces and the prompt's ``sim:<option>`` words, parsed by a
``TaskOptions`` (``dur<MS>``, ``taskfail``, ``forget``, ``reject``; a subclass adds its own).

``create_app(settings, extra_plugins=(plugin,))`` builds a simulator with an extra plugin (tests).
"""

from __future__ import annotations

from gateway_simulator import textgen
from gateway_simulator.context import (
    BadRequest,
    Ctx,
    Faults,
    SimulatorSettings,
    StreamCut,
    json_response,
)
from gateway_simulator.routing import (
    Claim,
    Handler,
    ModelOf,
    SimVendor,
    WebHandler,
    add_route,
    bearer_token,
    body_model,
    endpoint,
)
from gateway_simulator.server import create_app
from gateway_simulator.sides import hookimpl
from gateway_simulator.taskopts import TaskOptions, option_words

__all__ = [
    "BadRequest",
    "Claim",
    "Ctx",
    "Faults",
    "Handler",
    "ModelOf",
    "SimVendor",
    "SimulatorSettings",
    "StreamCut",
    "TaskOptions",
    "WebHandler",
    "add_route",
    "bearer_token",
    "body_model",
    "create_app",
    "endpoint",
    "hookimpl",
    "json_response",
    "option_words",
    "textgen",
]
