"""The markers of the gateway's hooks (pluggy's, for the project name ``gateway``): ``hookspec``
declares an extension point (``gateway.hooks.specs``), ``hookimpl`` marks a plugin's implementation
of one.

Apart from the declarations, which name the core's types (the running gateway, adapters, task
families), so that a module of the core that implements a hook itself (rate limits, soft limits,
the default exception answer) imports only these two names.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("gateway")
hookimpl = pluggy.HookimplMarker("gateway")
