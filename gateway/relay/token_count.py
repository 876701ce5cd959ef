"""Token counting endpoints (each family routes its own to ``count_tokens`` here): the exact
figure from an upstream of the client's own format when one of the model's upstreams offers it,
the offline estimate (``gateway.relay.tokens``) otherwise. Either way nothing is charged, and the answer
says which in ``X-Gateway-Token-Count: upstream | estimate``.

The upstreams of the model are tried in routing order, same-format ones only (another format's
figure would count another request); any answer that is not a readable 200 (the upstream has no
such endpoint, refuses, fails or times out) moves on, and after the last the estimate is used.
A failed count does not cool an upstream down: generation is what routing health is about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.responses import Response

from gateway.edge.http import json_response
from gateway.relay.translation import UpstreamCall, same_format
from gateway.runtime.errors import UpstreamError
from gateway.upstream.attempt import UpstreamFailure, open_response, read_body
from gateway.upstream.pool import Target, UpstreamPool

log = logging.getLogger("gateway.relay.token_count")

HEADER = "X-Gateway-Token-Count"
UPSTREAM = "upstream"
ESTIMATE = "estimate"


def count_answer(field: str, estimate: int, exact: int | None) -> Response:
    """The family's count answer (``{field: n}``): the upstream's exact figure when there is one,
    else the estimate, and the header saying which."""
    return json_response({field: estimate if exact is None else exact},
                         headers={HEADER: ESTIMATE if exact is None else UPSTREAM})


async def upstream_count(pool: UpstreamPool, model: str, family: str, request_id: str,
                         build: Callable[[Target], UpstreamCall],
                         read: Callable[[bytes], int | None]) -> int | None:
    """The count of the first same-format upstream of ``model`` that gives one: ``build`` makes
    its call, ``read`` finds the figure in a 200 answer (None when it has none)."""
    for target in pool.targets(model, "generate"):
        if not same_format(target.protocol, family):
            continue
        try:
            response = await open_response(pool, target, build(target), request_id)
            body = await read_body(target, response)
        except UpstreamFailure as failure:
            log.info("upstream %s gave no token count: %s", target.name, failure.reason)
            continue
        except UpstreamError as error:  # a misconfigured upstream: generation reports it
            log.info("upstream %s gave no token count: %s", target.name, error)
            continue
        if response.status == 200 and (count := read(body)) is not None:
            return count
        log.info("upstream %s gave no token count (HTTP %s)", target.name, response.status)
    return None
