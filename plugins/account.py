"""Account endpoints (spec 4.13, CONTRACT 4b): balance, usage and the request log of the caller.

Two credentials, never interchangeable (``gateway.accounts.auth``):

* API key (``sk-...``): ``GET /v1/dashboard/billing/subscription`` and
  ``GET /v1/dashboard/billing/usage``, the OpenAI-style views of the calling key;
* user token (``ut-...``): ``GET /api/user/self`` and ``GET /api/log/self``, the new-api-style views
  of the whole account (amounts in RMB).

Every error uses the gateway's own envelope (``DEFAULT_FAMILY``: the OpenAI shape) and the API-key
endpoints take a Bearer key. The handlers live in ``plugins.account_views``.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from gateway.api import Gateway, hookimpl
from plugins.account_views import billing_subscription, billing_usage, log_self, user_self


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [
        Route("/v1/dashboard/billing/subscription", billing_subscription, methods=["GET"]),
        Route("/v1/dashboard/billing/usage", billing_usage, methods=["GET"]),
        Route("/api/user/self", user_self, methods=["GET"]),
        Route("/api/log/self", log_self, methods=["GET"]),
    ]
