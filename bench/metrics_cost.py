"""``python -m bench.metrics_cost``: the CPU a metered call's metric updates cost (``plugins.metrics``
``Metrics.observe``), in one process, without the rest of the gateway: four kinds of calls (two
models, plain and streamed) in turn, 200,000 calls a round, the best of 9 rounds of process CPU.

Run it as is for one process's in-memory series, and with ``PROMETHEUS_MULTIPROC_DIR`` set to an
empty directory for the memory-mapped files of ``gateway serve --workers N``; with
``PYTHONPATH=OTHER_TREE`` it measures another checkout's ``plugins.metrics``.
"""

from __future__ import annotations

import sys
import time

from gateway.accounts.records import RequestLog
from plugins.metrics import Metrics

CALLS = 200_000
ROUNDS = 9


class _Catalogue:
    def label(self, model: str) -> str | None:
        return model if model.startswith("sim-") else None

    def model(self, model: str) -> object | None:  # what the checkouts before Catalogue.label ask
        return object() if model.startswith("sim-") else None


def main() -> int:
    metrics = Metrics(_Catalogue())  # type: ignore[arg-type]
    logs = [RequestLog(request_id="req_1", created_at=time.time(), user_id=1, key_id=1, token_name="t",
                       route="/v1/chat/completions", family="chat", model=model, status=200,
                       outcome="success", use_time_ms=12, prompt_tokens=20, completion_tokens=40,
                       charge_nano=75_000, is_stream=stream, first_byte_ms=3 if stream else None)
            for model in ("sim-chat", "sim-claude") for stream in (False, True)]
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for i in range(CALLS):
            metrics.observe(logs[i & 3])
        best = min(best, (time.process_time() - started) / CALLS)
    print(f"{best * 1e6:.2f} us of CPU per call ({sys.argv[1] if len(sys.argv) > 1 else 'this tree'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
