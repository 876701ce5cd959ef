"""Throughput and latency with wrk (C, one thread): a load generator that costs far less CPU than the
servers it measures, which matters on a machine whose cores it shares with them. A Lua script
posts the scenario's body and prints wrk's own summary and latency percentiles as one JSON line."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_SCRIPT = """
wrk.method = "POST"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
{headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\n{{"requests":%d,"duration_us":%d,"p50":%d,"p99":%d,"errors":%d,"status":%d}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""


@dataclass
class Result:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def available() -> bool:
    return shutil.which("wrk") is not None


def run(url: str, body: bytes, headers: dict[str, str], *, connections: int, seconds: float) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        body_path = Path(tmp) / "body"
        body_path.write_bytes(body)
        lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
        script = Path(tmp) / "post.lua"
        script.write_text(_SCRIPT.format(body=body_path, headers=lines))
        command = ["wrk", "-t1", f"-c{connections}", f"-d{max(seconds, 1):.0f}s", "--timeout", "30s",
                   "-s", str(script), url]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    data = json.loads(out.strip().splitlines()[-1])
    return Result(data["requests"], data["duration_us"] / 1e6, data["p50"] / 1000, data["p99"] / 1000,
                  data["errors"] + data["status"])
