"""Start the simulator and a gateway as real processes on free loopback ports, and read their CPU
time and peak memory from /proc (each process's own accounting)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (fields 14 and 15 of /proc/pid/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_simulator(port: int, token_ms: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "simulator", "--port", str(port),
                             "--token-ms", str(token_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc


def write_config(directory: Path, port: int, sim_port: int, admin_key: str) -> Path:
    sim = f"http://127.0.0.1:{sim_port}"
    text = f"""
listen: {{host: 127.0.0.1, port: {port}}}
database: sqlite:///{directory}/bench.db
admin_key: {admin_key}
simulator: {{enabled: false}}
logging: {{access_log: false}}
models:
  - {{id: sim-chat, price: {{input_per_mtok: 0.5, output_per_mtok: 1.5}}}}
  - {{id: sim-claude, price: {{input_per_mtok: 3, output_per_mtok: 15}}}}
  - {{id: claude-on-chat, price: {{input_per_mtok: 3, output_per_mtok: 15}}}}
upstreams:
  - {{name: sim-openai, protocol: chat, base_url: "{sim}", api_key: sk-sim, models: [sim-chat],
     timeouts: {{connect_s: 5, first_byte_s: 60, idle_s: 60}}}}
  - {{name: sim-openai-for-claude, protocol: chat, base_url: "{sim}", api_key: sk-sim,
     models: {{claude-on-chat: sim-chat}}}}
  - {{name: sim-anthropic, protocol: messages, base_url: "{sim}", api_key: sk-sim, models: [sim-claude]}}
"""
    path = directory / "bench.yaml"
    path.write_text(text)
    return path


def start_gateway(config: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
