"""The config file's shape: one Struct per section, with its defaults and bounds.

``gateway.settings.config`` reads a file into these (every error naming its key path) and
re-exports them; the rules beyond the types are ``gateway.settings.checks``. Apart from the
reading so that the rules, and what else takes a config (the secrets scrubber, the optional
extras' check), import the types without importing the reader that calls them.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

import msgspec

from gateway.settings.model_ids import WILDCARD, is_pattern


class _Section(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class Listen(_Section):
    host: str = "127.0.0.1"
    port: int = 8000
    # Connections the kernel queues before the server accepts them; on granian also the most
    # requests one worker serves at once (a stream is one for its whole length).
    backlog: Annotated[int, msgspec.Meta(ge=64)] = 4096


class SimulatorConfig(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8101
    ttft_ms: float = 0.0
    token_ms: float = 0.0


class BillingConfig(_Section):
    rmb_per_usd: float = 7.2
    demo_quota_usd: float = 100.0  # balance of the demo user made on first start


class BootstrapConfig(_Section):
    # The demo user (and its key, printed once) made on a first start with no users: None makes it
    # only for a config that uses the simulator, where nobody would otherwise have a key to try.
    demo_user: bool | None = None


class GroupConfig(_Section):
    ratio: float = 1.0
    models: list[str] | None = None
    # Defaults for the keys of this group's users that set no ``rpm`` / ``tpm`` of their own
    # (``gateway.accounts.ratelimit``): requests and tokens per minute per key; None = no limit.
    rpm: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tpm: Annotated[int, msgspec.Meta(ge=1)] | None = None


class Price(_Section):
    """USD. Token prices per million tokens; the rest per unit named in the key."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None
    reasoning_per_mtok: float | None = None
    per_second: float | None = None
    per_minute: float | None = None
    per_task: float | None = None
    per_mchar: float | None = None  # speech synthesis: USD per million input characters
    per_image: float | None = None  # Images API: USD per image returned


class ModelConfig(_Section):
    id: str
    owned_by: str = "gateway"
    created: int = 1700000000
    price: Price = msgspec.field(default_factory=Price)
    max_output_tokens: int = 4096  # output ceiling reserved when a request sets no max_tokens
    # Models tried in order when every upstream of this one failed or refused the input as too long
    # for its context (``gateway.relay.fallback``); their own fallbacks are not followed.
    fallbacks: list[str] = []


class TasksConfig(_Section):
    poll_first_s: float = 5.0
    poll_interval_s: float = 15.0
    timeout_s: float = 3600.0
    callback_allowlist: list[str] = []
    # Result files (images, music, videos) served by the gateway (``gateway.tasks.media``): the
    # largest file one download relays, the longest one download may take, how long a signed link
    # stays valid, and the gateway's address as clients reach it (links in callbacks need it; a
    # response's links otherwise use the address the request came to).
    media_download_bytes: Annotated[int, msgspec.Meta(gt=0)] = 2 * 1024 * 1024 * 1024
    media_download_s: Annotated[float, msgspec.Meta(gt=0)] = 1800.0
    media_link_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 86400.0
    public_url: str | None = None


class UpstreamTimeouts(_Section):
    connect_s: float = 10.0
    first_byte_s: float = 120.0
    idle_s: float = 120.0  # longest silence between two stream chunks
    # The whole of one attempt, connect to the last byte of the answer (a stream included): an
    # upstream dripping a huge body a byte at a time is cut here, not when it gives up.
    total_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0


class UpstreamConfig(_Section):
    name: str
    # The wire protocol the upstream speaks: any ``protocol`` a registered adapter declares
    # (checked by ``check_protocols`` once the plugins are known).
    protocol: str
    base_url: str
    api_key: str = ""
    models: list[str] | dict[str, str] = []
    priority: int = 0
    weight: int = 1
    timeouts: UpstreamTimeouts = msgspec.field(default_factory=UpstreamTimeouts)
    # Optional APIs the upstream serves besides its protocol's standard paths. The core does not
    # read them: a translator that can use one looks for the name it documents.
    features: list[str] = []
    # Extra headers sent with every call to this upstream (OpenRouter's ``HTTP-Referer``, an
    # organisation header, a proxy's own credential); they win over the protocol's auth header.
    headers: dict[str, str] = {}
    # How URLs and the credential are laid out: "standard" (the protocol's own paths under
    # ``base_url``) or a style the protocol's adapter declares (``azure`` for ``chat``).
    style: str = "standard"
    api_version: str | None = None  # the ``api-version`` query of styles that need one (azure)
    # Result links of media tasks: "gateway" hands out the gateway's own (signed) links and relays
    # the files; "upstream" hands out the upstream's links as it gave them (CONTRACT 6d).
    media_links: Literal["gateway", "upstream"] = "gateway"

    def model_map(self) -> dict[str, str]:
        """Public model id -> the id this upstream knows it by. A pattern of the list form
        (``vendor/*``) maps to ``*``: the remainder of the public id is the upstream's
        (``gateway.settings.model_ids``)."""
        if isinstance(self.models, dict):
            return dict(self.models)
        return {m: (WILDCARD if is_pattern(m) else m) for m in self.models}


class RoutingConfig(_Section):
    max_attempts: int = 3  # upstream tries per request, failover included
    cooldown_s: float = 30.0  # how long a failing upstream is left out


class LimitsConfig(_Section):
    json_body_bytes: int = 32 * 1024 * 1024
    # Array items and object members in one JSON body: what its decoding costs in time and memory
    # (``gateway.relay.offload``). 100,000 messages of a chat body are about 300,000.
    json_max_elements: Annotated[int, msgspec.Meta(gt=0)] = 400_000
    transcription_bytes: int = 25 * 1024 * 1024
    video_submit_bytes: int = 200 * 1024 * 1024
    # Request-body deadlines (``gateway.edge.deadlines``, 408): the longest silence while a body is
    # coming, and the longest a whole body may take from the start of the request.
    body_idle_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    body_total_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    # The longest a connection may take to send a complete request head, idle keep-alive time
    # included; the server then closes it (``gateway.server.options``: granian and hypercorn).
    header_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    # The largest request head (request line and headers) the server buffers: over it, 431 (400 on
    # uvicorn), the app never called (``gateway.server.options``). Bodies are not bounded by it.
    request_head_bytes: Annotated[int, msgspec.Meta(ge=8192)] = 64 * 1024
    # What an upstream's answer may make the gateway hold (over a limit: a failed attempt, 502).
    upstream_header_bytes: Annotated[int, msgspec.Meta(gt=0)] = 16 * 1024  # one header line
    upstream_header_count: Annotated[int, msgspec.Meta(gt=0)] = 128  # header lines of one answer
    # Connections open at once to one upstream host (a stream holds one for its whole length).
    upstream_connections_per_host: Annotated[int, msgspec.Meta(gt=0)] = 4096
    upstream_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024 * 1024  # a whole answer, decoded
    sse_event_bytes: Annotated[int, msgspec.Meta(gt=0)] = 16 * 1024 * 1024  # one event of a stream
    stream_element_bytes: Annotated[int, msgspec.Meta(gt=0)] = 16 * 1024 * 1024  # one JSON array element


class RateLimitConfig(_Section):
    """How the rate limits (``gateway.accounts.ratelimit``) behave when Redis does not answer."""

    on_redis_error: Literal["allow", "deny"] = "allow"  # let calls through, or refuse them (503)
    redis_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 0.25  # per Redis command


class MeteringConfig(_Section):
    """How settlements are batched, and how fast a crashed process's reservations are released."""

    batch_max: int = 256  # settlements committed in one transaction at most
    flush_interval_s: float = 0.025  # the longest a settlement waits for its batch
    heartbeat_s: float = 2.0  # each process says it is alive this often
    stale_after_s: float = 10.0  # silent this long = crashed: its reservations are released


class LoggingConfig(_Section):
    access_log: bool = True
    level: str = "INFO"


class LogsConfig(_Section):
    """The request log's retention (``gateway.accounts.metering.retention``) and refusal rows."""

    retain_days: Annotated[float, msgspec.Meta(ge=0)] = 90.0  # raw rows kept; 0 keeps them for ever
    prune_batch: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000  # rows deleted per transaction
    prune_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0  # between two rounds of pruning
    refusal_queue_max: Annotated[int, msgspec.Meta(ge=0)] = 10_000  # refusal rows waiting at most


class CacheConfig(_Section):
    """The response cache (``plugins.cache``, CONTRACT 7): identical generations of one user
    answered from what was kept, within ``ttl_s``."""

    enabled: bool = False  # for every key; a key's own ``cache: true`` turns it on for that key alone
    ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 3600.0
    # A hit is charged this share of what the kept answer's usage costs at the model's prices now.
    hit_price_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    # Bounds of what is kept (oldest entries evicted first), and of one answer: a larger one is
    # served but not kept.
    max_entries: Annotated[int, msgspec.Meta(ge=1)] = 10_000
    max_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 256 * 1024 * 1024
    entry_bytes: Annotated[int, msgspec.Meta(ge=256)] = 1024 * 1024
    # Where the entries sit in Redis (when ``redis`` is set): deployments sharing one Redis each
    # need their own.
    redis_prefix: str = "gateway:cache:"


class TelemetryConfig(_Section):
    """OpenTelemetry traces (``plugins.telemetry``, CONTRACT 7): off while ``otlp_endpoint`` is
    unset, and then nothing of OpenTelemetry is imported and no call pays for it."""

    otlp_endpoint: str | None = None  # the collector's base URL: spans go to its /v1/traces
    service_name: str = "model-gateway"  # the spans' service.name
    # The share of new traces recorded; a call continuing a client's trace follows its sampled flag.
    sample_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0


class Config(_Section, dict=True):
    listen: Listen = msgspec.field(default_factory=Listen)
    database: str = "sqlite:///./data/gateway.db"
    redis: str | None = None
    admin_key: str | None = None
    simulator: SimulatorConfig = msgspec.field(default_factory=SimulatorConfig)
    billing: BillingConfig = msgspec.field(default_factory=BillingConfig)
    bootstrap: BootstrapConfig = msgspec.field(default_factory=BootstrapConfig)
    groups: dict[str, GroupConfig] = msgspec.field(default_factory=lambda: {"default": GroupConfig()})
    models: list[ModelConfig] = []
    tasks: TasksConfig = msgspec.field(default_factory=TasksConfig)
    upstreams: list[UpstreamConfig] = []
    routing: RoutingConfig = msgspec.field(default_factory=RoutingConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    metering: MeteringConfig = msgspec.field(default_factory=MeteringConfig)
    ratelimit: RateLimitConfig = msgspec.field(default_factory=RateLimitConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    logs: LogsConfig = msgspec.field(default_factory=LogsConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    telemetry: TelemetryConfig = msgspec.field(default_factory=TelemetryConfig)
    trusted_proxies: list[str] = []  # IPs/CIDRs whose X-Forwarded-For is believed
    # On SIGTERM, how long calls in flight may still run before open streams are ended with their
    # family's error event (``gateway.runtime.lifecycle``).
    shutdown_grace_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 30.0

    @cached_property
    def models_by_id(self) -> dict[str, ModelConfig]:
        return {m.id: m for m in self.models}

    def model(self, model_id: str) -> ModelConfig | None:
        return self.models_by_id.get(model_id)
