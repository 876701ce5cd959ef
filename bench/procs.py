"""Start the simulator, the gateway and the floor as real processes on free loopback ports, and read
their CPU time and memory from /proc (each process's own accounting, summed over the process tree:
granian and multi-worker servers serve from child processes)."""

from __future__ import annotations

import os
import resource
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench.scenarios import PACED, SLOW

_CLK_TCK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_fd_limit() -> int:
    """The soft limit of open files raised to the hard one (children inherit it): the 2,000 slow
    streams hold 2,000 client and 2,000 upstream sockets in one relay. The new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65536)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
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


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    found = [pid]
    for parent in found:
        for task in Path(f"/proc/{parent}/task").glob("*"):
            children = task / "children"
            if children.exists():
                found.extend(int(c) for c in children.read_text().split())
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process tree (fields 14 and 15 of /proc/pid/stat)."""
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _CLK_TCK


def cpu_stolen() -> tuple[float, float]:
    """Seconds of CPU time the hypervisor took from this machine (``steal`` in /proc/stat), and
    seconds of all CPU time, both summed over the cores since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[7] / _CLK_TCK, sum(fields[:8]) / _CLK_TCK


def idle_halt() -> str:
    """How this machine's idle cores wait, which moves every figure at concurrency 1: the cpuidle
    driver and, under a guest's ``haltpoll``, how long an idle vCPU polls before it halts (a halted
    vCPU is woken through the hypervisor, tens of microseconds later and with colder caches)."""
    driver = Path("/sys/devices/system/cpu/cpuidle/current_driver")
    poll = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    try:
        name = driver.read_text().strip()
    except OSError:
        name = "unknown"
    if name != "haltpoll":
        return f"cpuidle driver {name}"
    try:
        return f"cpuidle driver haltpoll, guest_halt_poll_ns {int(poll.read_text())}"
    except (OSError, ValueError):
        return "cpuidle driver haltpoll"


def rss_mb(pid: int, field: str = "VmHWM") -> float:
    """The largest ``field`` (VmHWM: peak RSS; VmRSS: current) of any one process of the tree:
    the memory of the busiest worker."""
    best = 0.0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    best = max(best, int(line.split()[1]) / 1024)
        except FileNotFoundError:
            continue
    return best


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, **(env or {})})


def start_simulator(port: int, token_ms: float, log: Path) -> subprocess.Popen[bytes]:
    proc = _spawn(["-m", "gateway", "simulator", "--port", str(port), "--token-ms", str(token_ms)], log)
    wait_listening(port, proc)
    return proc


def start_upstream(port: int, log: Path) -> list[subprocess.Popen[bytes]]:
    """The bench's upstream on ``port``: the simulator (on a port of its own) behind the replaying
    front of bench/replay.py, which answers each distinct request from memory after the first.
    Both processes, to be stopped in reverse order."""
    sim_port = free_port()
    sim = start_simulator(sim_port, 0.0, log)
    try:
        replay = start_replay(port, f"http://127.0.0.1:{sim_port}", log)
    except BaseException:
        stop(sim)
        raise
    return [sim, replay]


def start_replay(port: int, simulator: str, log: Path,
                 tls: tuple[Path, Path] | None = None) -> subprocess.Popen[bytes]:
    """A replaying front (bench/replay.py) of ``simulator`` on ``port``; over TLS with ``tls``
    (the server's certificate chain and key, PEM files)."""
    proc = _spawn(["-m", "bench.replay", str(port), simulator, *(str(p) for p in tls or ())], log)
    wait_listening(port, proc)
    return proc


def start_floor(server: str, port: int, upstream: str, log: Path,
                env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    proc = _spawn(["-m", "bench.floor", server, str(port)], log,
                  {"BENCH_FLOOR_UPSTREAM": upstream, **(env or {})})
    wait_listening(port, proc)
    return proc


def start_gateway(config: Path, port: int, server: str, log: Path,
                  env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    proc = _spawn(["-m", "gateway", "serve", "--config", str(config), "--server", server], log, env)
    wait_listening(port, proc)
    return proc


def start_litellm(config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    venv = ROOT / "bench" / ".litellm-venv" / "bin"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "NO_DOCS": "True", "DISABLE_ADMIN_UI": "True"}
    with log.open("ab") as out:
        proc = subprocess.Popen([str(venv / "litellm"), "--config", str(config), "--host", "127.0.0.1",
                                 "--port", str(port), "--num_workers", "1"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=config.parent, env=env)
    wait_listening(port, proc, timeout=180)
    return proc


def write_config(directory: Path, name: str, port: int, sim_port: int, admin_key: str,
                 extra_models: int = 0, upstream: str | None = None) -> Path:
    """The bench config: one upstream per protocol plus the cross-protocol routes of the
    translated scenarios; ``extra_models`` more catalogue entries for the scale check; every
    upstream at ``upstream`` when given (the HTTPS front), else on ``sim_port`` of the loopback."""
    sim = upstream or f"http://127.0.0.1:{sim_port}"
    price = "{input_per_mtok: 3, output_per_mtok: 15}"
    extra = "".join(f"  - {{id: extra-{i}, price: {price}}}\n" for i in range(extra_models))
    extra_ids = ", ".join(f"extra-{i}" for i in range(extra_models))
    p = PACED  # each model has a paced twin (bench/scenarios.py), routed to the upstream's twin
    models = "".join(f"  - {{id: {name}{x}, price: {cost}}}\n" for x in ("", p) for name, cost in (
        ("sim-chat", "{input_per_mtok: 0.5, output_per_mtok: 1.5}"), ("sim-claude", price),
        ("sim-gemini", price), ("sim-embed", "{input_per_mtok: 0.02}"), ("claude-on-chat", price),
        ("gemini-on-chat", price), ("chat-on-messages", price)))
    models += f"  - {{id: sim-chat{SLOW}, price: {{input_per_mtok: 0.5, output_per_mtok: 1.5}}}}\n"
    text = f"""
listen: {{host: 127.0.0.1, port: {port}}}
database: sqlite:///{directory}/{name}.db
admin_key: {admin_key}
simulator: {{enabled: false}}
logging: {{access_log: false}}
models:
{models}{extra}upstreams:
  - {{name: sim-openai, protocol: chat, base_url: "{sim}", api_key: sk-sim,
     models: [sim-chat, sim-embed, sim-chat{p}, sim-embed{p}, sim-chat{SLOW}]}}
  - {{name: sim-openai-x, protocol: chat, base_url: "{sim}", api_key: sk-sim,
     models: {{claude-on-chat: sim-chat, gemini-on-chat: sim-chat, claude-on-chat{p}: sim-chat{p},
              gemini-on-chat{p}: sim-chat{p}}}}}
  - {{name: sim-anthropic, protocol: messages, base_url: "{sim}", api_key: sk-sim,
     models: {{sim-claude: sim-claude, chat-on-messages: sim-claude, sim-claude{p}: sim-claude{p},
              chat-on-messages{p}: sim-claude{p}}}}}
  - {{name: sim-google, protocol: v1beta, base_url: "{sim}", api_key: sk-sim,
     models: [sim-gemini, sim-gemini{p}]}}
"""
    if extra_models:
        text += f'  - {{name: sim-extra, protocol: chat, base_url: "{sim}", api_key: sk-sim, ' \
                f"models: [{extra_ids}]}}\n"
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


def add_keys(db: Path, count: int) -> None:
    """``count`` more API keys (random hashes, one user) straight into the database: the scale
    check's 100,000-key table."""
    with sqlite3.connect(db) as conn:
        user_id = conn.execute("SELECT id FROM users ORDER BY id LIMIT 1").fetchone()[0]
        now = int(time.time())
        conn.executemany(
            "INSERT INTO api_keys (user_id, name, key_hash, masked, created_at) VALUES (?, ?, ?, ?, ?)",
            ((user_id, f"k{i}", os.urandom(32).hex(), "sk-...", now) for i in range(count)))


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
