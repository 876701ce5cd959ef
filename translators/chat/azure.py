"""``style: azure`` of the ``chat`` protocol: Azure OpenAI deployments.

Azure OpenAI serves the OpenAI wire format under per-deployment paths, with the API version as a
query parameter and the key in an ``api-key`` header::

    POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21
    api-key: <key>

The deployment is the upstream's model id (the value side of ``models: {public-id: deployment}``).
``base_url`` is the resource's origin (``https://NAME.openai.azure.com``), with or without the
trailing ``/openai``.
"""

from __future__ import annotations

from urllib.parse import quote

from gateway.api import UpstreamConfig

_PREFIX = "/openai"
_STANDARD_PREFIX = "/v1"


class AzureStyle:
    def check(self, upstream: UpstreamConfig) -> list[str]:
        """Config problems, each ``key: what is wrong`` under the upstream's path."""
        if not upstream.api_version:
            return ["api_version: style azure needs the API version (e.g. api_version: \"2024-10-21\")"]
        return []

    def locate(self, upstream: UpstreamConfig, path: str, upstream_model: str) -> tuple[str, dict[str, str]]:
        rest = path[len(_STANDARD_PREFIX):] if path.startswith(_STANDARD_PREFIX + "/") else path
        endpoint, sep, query = rest.partition("?")
        version = f"api-version={quote(upstream.api_version or '', safe='')}"
        query = f"{query}&{version}" if sep else version
        deployment = quote(upstream_model, safe="")
        base_path = upstream.base_url.rstrip("/")
        prefix = "" if base_path.endswith(_PREFIX) else _PREFIX  # the user may have written it
        return f"{prefix}/deployments/{deployment}{endpoint}?{query}", {"api-key": upstream.api_key}


AZURE = AzureStyle()
