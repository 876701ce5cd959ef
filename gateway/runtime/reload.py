"""Reloading the config file without a restart (CONTRACT 6b): SIGHUP, ``gateway reload`` and
``POST /admin/reload`` all come here.

The file is read and checked whole by the loader ``gateway serve`` uses
(``settings.config.load_serving_config``); an invalid file changes nothing and every error is
reported. A valid one swaps what calls read when they start: the config, the catalogue (models,
prices, groups), the upstream pool's routing, the secret scrubber; calls in flight keep what they
started with (``CallContext`` holds its own config and catalogue, and its targets). The swap is a
few assignments with no ``await`` between them: no call sees half of it.

Some parts are built once per process (the listener, the database and Redis clients, the meter,
the server's and the upstream client's limits, ...): a change there is kept out of the running
config and reported as needing a restart (``RESTART_KEYS``, ``RESTART_LIMITS``), never silently.

With several workers each one reloads: a worker that reloaded by request tells the others with
SIGHUP, finding them through a directory where each worker keeps a file named by its pid
(``gateway.runtime.workers``, made by ``gateway serve``); granian's supervising process forwards its
own SIGHUP to them the same way (``gateway.server.servers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from gateway.accounts.catalogue import Catalogue
from gateway.runtime.context import Gateway
from gateway.runtime.secrets_scrub import SecretScrubber
from gateway.settings.config import Config, ConfigError, load_serving_config

log = logging.getLogger("gateway.server.serve")

# Top-level keys read once when the process starts.
RESTART_KEYS = ("listen", "database", "redis", "simulator", "admin_key", "metering", "logging", "logs",
                "trusted_proxies", "shutdown_grace_s", "telemetry")
# Limits built at start into the server, the request-body middleware and the upstream client's
# session; the others (a stream's event and element bounds, an answer body's) apply to new calls.
RESTART_LIMITS = ("header_timeout_s", "request_head_bytes", "upstream_header_bytes", "upstream_header_count",
                  "upstream_connections_per_host", "json_body_bytes", "json_max_elements",
                  "transcription_bytes", "video_submit_bytes", "body_idle_timeout_s", "body_total_timeout_s")
# The Reloader's slot in ``Gateway.extensions``: the gateway knows nothing of reloads, which
# rebuild parts of it (this module imports the Gateway).
EXTENSION = "gateway.runtime.reload"


@dataclass
class ReloadResult:
    errors: list[str] = field(default_factory=list)  # the file's problems: nothing was changed
    restart_needed: list[str] = field(default_factory=list)  # changed keys kept as they were
    unchanged: bool = False  # the file is the one already loaded

    @property
    def ok(self) -> bool:
        return not self.errors


class Reloader:
    """The config file of one serving process and the text last loaded from it."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._loaded: bytes | None = None
        self._lock = asyncio.Lock()

    def attach(self, gateway: Gateway) -> None:
        """Make this the file ``gateway`` serves from (``gateway serve``): SIGHUP, ``gateway
        reload`` and ``POST /admin/reload`` re-read it."""
        gateway.extensions[EXTENSION] = self

    def remember(self) -> None:
        """The file as it is now is the one the process starts with (read before the config is
        loaded from it: a change in between is found by the next reload, not missed)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self._loaded = self.path.read_bytes()

    async def reload(self, gateway: Gateway) -> ReloadResult:
        if self.path is None:
            return ReloadResult(errors=["$: this gateway was not started from a config file"])
        path = self.path
        async with self._lock:  # one at a time: a SIGHUP while the admin API reloads waits
            try:
                text = await asyncio.to_thread(path.read_bytes)
            except OSError as exc:
                return ReloadResult(errors=[f"$: cannot read {path}: {exc.strerror}"])
            if text == self._loaded:
                return ReloadResult(unchanged=True)
            try:
                new = await asyncio.to_thread(load_serving_config, path, gateway.adapters)
            except ConfigError as exc:
                return ReloadResult(errors=list(exc.errors))
            result = ReloadResult(restart_needed=restart_needed(gateway.config, new))
            apply(gateway, kept_for_restart(gateway.config, new))
            self._loaded = text
            return result


    async def catch_up(self, gateway: Gateway) -> None:
        """Once this worker can be signalled: a change made to the file while it was starting
        (whose SIGHUP it could not hear yet) is loaded now."""
        result = await self.reload(gateway)
        if not result.unchanged:
            report(result, "a change made while the worker started")


def reloader_of(gateway: Gateway) -> Reloader | None:
    """The file ``gateway`` serves from; None for a gateway built from a config object."""
    found = gateway.extensions.get(EXTENSION)
    return found if isinstance(found, Reloader) else None


def restart_needed(old: Config, new: Config) -> list[str]:
    keys = [key for key in RESTART_KEYS if getattr(old, key) != getattr(new, key)]
    keys += [f"limits.{name}" for name in RESTART_LIMITS
             if getattr(old.limits, name) != getattr(new.limits, name)]
    return keys


def kept_for_restart(old: Config, new: Config) -> Config:
    """``new`` with the parts that need a restart as the running process has them."""
    running = {name: getattr(old.limits, name) for name in RESTART_LIMITS}
    limits = msgspec.structs.replace(new.limits, **running)
    kept = {key: getattr(old, key) for key in RESTART_KEYS}
    return msgspec.structs.replace(new, limits=limits, **kept)


def apply(gateway: Gateway, config: Config) -> None:
    """Swap in ``config`` (already checked): calls that start from now on see it whole."""
    catalogue = Catalogue(config)
    scrubber = SecretScrubber.of_config(config)
    gateway.upstreams.reconfigure(config)
    gateway.config = config
    gateway.catalogue = catalogue
    gateway.scrubber = scrubber
    gateway.plugins.hook.gateway_config_reloaded(gateway=gateway)


def report(result: ReloadResult, how: str) -> None:
    """The log lines of a reload: one ERROR line holding every error, or one INFO line (and one
    WARNING naming what needs a restart)."""
    if result.errors:
        log.error("config reload (%s) refused, nothing changed: %s", how, "; ".join(result.errors))
    elif result.unchanged:
        log.info("config reload (%s): the file is unchanged", how)
    else:
        log.info("config reloaded (%s): upstreams, models, prices, groups and limits apply to new calls", how)
    if result.restart_needed:
        log.warning("config reload (%s): changes to %s need a restart (kept as they were)", how,
                    ", ".join(result.restart_needed))


# --- SIGHUP ---------------------------------------------------------------------------------------

def watch_sighup(gateway: Gateway, reloader: Reloader) -> None:
    """SIGHUP reloads this process (a worker: one of its own, never its server's restart)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    async def on_sighup() -> None:
        report(await reloader.reload(gateway), "SIGHUP")

    def handler() -> None:
        task = loop.create_task(on_sighup())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread
        loop.add_signal_handler(signal.SIGHUP, handler)


def unwatch_sighup() -> None:
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
