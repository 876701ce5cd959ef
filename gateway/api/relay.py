"""The relay's building blocks, for a family whose endpoints relay on their own rather than through
``serve_generate`` (audio uploads, the Responses API's stored state, token counts): the call's
metering (``CallContext``), upstream attempts with failover (``attempt_models``: then the model's
fallbacks, ``fallback_headers`` for the answer), stream relays, work moved off the event loop,
token estimates, and the sealed reasoning state families hand to clients.
"""

from __future__ import annotations

from gateway.accounts.ratelimit import admit_call
from gateway.relay.call import CallContext
from gateway.relay.fallback import FALLBACK_HEADER, attempt_models, fallback_headers
from gateway.relay.offload import off_loop, off_process
from gateway.relay.reasoning_state import (
    for_client,
    for_upstream,
    from_client,
    holds_sealed,
    seal,
    state_of,
    unseal,
)
from gateway.relay.replay import CACHE_HEADER, CacheLookup, KeptAnswer, events_response, response_events
from gateway.relay.stream import open_relay
from gateway.relay.token_count import count_answer, upstream_count
from gateway.relay.tokens import (
    body_token_bound,
    estimate_body_tokens,
    estimate_parts_tokens,
    estimate_request_tokens,
    estimate_text_tokens,
)
from gateway.runtime.secrets_scrub import scrub_secrets
from gateway.upstream.attempt import UpstreamFailure, attempt, read_body, start_stream, upstream_io
from gateway.upstream.client import UpstreamAnswer
from gateway.upstream.pool import Target

__all__ = [
    "CACHE_HEADER",
    "FALLBACK_HEADER",
    "CacheLookup",
    "CallContext",
    "KeptAnswer",
    "Target",
    "UpstreamAnswer",
    "UpstreamFailure",
    "admit_call",
    "attempt",
    "attempt_models",
    "body_token_bound",
    "count_answer",
    "estimate_body_tokens",
    "estimate_parts_tokens",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "events_response",
    "fallback_headers",
    "for_client",
    "for_upstream",
    "from_client",
    "holds_sealed",
    "off_loop",
    "off_process",
    "open_relay",
    "read_body",
    "response_events",
    "scrub_secrets",
    "seal",
    "start_stream",
    "state_of",
    "unseal",
    "upstream_count",
    "upstream_io",
]
