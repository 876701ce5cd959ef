"""The values of the storage's usage and retention methods (``sql_usage``): what a usage query
asks of the roll-ups and what it gets back. Plain msgspec Structs; no behaviour."""

from __future__ import annotations

from typing import Literal

import msgspec

GroupBy = Literal["user", "key", "model", "group", "upstream"]


class UsageQuery(msgspec.Struct, frozen=True):
    """Roll-up rows of spans of ``span_s`` seconds (3600 or 86400) starting in [since, until)
    (Unix seconds, multiples of the span), summed per span and per ``group_by`` value (one sum per
    span without it). ``user_id``, ``key_id``, ``model``: only those rows (not for "upstream")."""

    span_s: int
    since: int
    until: int
    group_by: GroupBy | None = None
    user_id: int | None = None
    key_id: int | None = None
    model: str | None = None


class UsageRow(msgspec.Struct):
    """One span's sums for one ``key`` (the ``group_by`` value: a user or key id, a model, group
    or upstream name; None without ``group_by``). Token and money sums are 0 per upstream; the
    ``first_byte`` sums only per upstream."""

    start: int
    key: int | str | None
    calls: int = 0
    errors: int = 0
    stream_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    cost_nano: int = 0
    uncharged_nano: int = 0
    latency_ms_sum: int = 0
    first_byte_ms_sum: int = 0
    first_byte_calls: int = 0


class PruneStep(msgspec.Struct):
    """What one retention step did: rows deleted, whether this process holds the pruning lease
    (another replica prunes otherwise), whether nothing older than the cutoff is left."""

    deleted: int
    held: bool
    done: bool
