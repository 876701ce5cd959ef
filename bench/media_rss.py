"""Peak RSS growth of the gateway's process while a 200 MiB video is downloaded through it
(issue 34 point 6): ``python -m bench.media_rss``.

``gateway serve`` runs the default config (config/gateway.yaml) on free ports with a fresh SQLite
file; its simulator (a process of its own) makes the file as it sends it (``sim:kb<N>``). A user
and key are made through the admin API, a video-B task is made and finished, and its
``video_url`` (the gateway's signed link) is read to the end. Each process under the CLI has its
high-water mark reset (``/proc/<pid>/clear_refs``) just before, and its growth is printed after.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.procs import free_port

ROOT = Path(__file__).resolve().parents[1]
SIZE_KB = 200 * 1024
ADMIN_KEY = "admin-media-rss"


def kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def write_config(tmp: Path, port: int, sim_port: int) -> Path:
    text = (ROOT / "config" / "gateway.yaml").read_text()
    text = re.sub(r"port: 8000\b", f"port: {port}", text)
    text = re.sub(r"port: 8101\b", f"port: {sim_port}", text)
    text = text.replace("sqlite:///./data/gateway.db", f"sqlite:///{tmp}/gateway.db")
    text = re.sub(r"admin_key: .*", f"admin_key: {ADMIN_KEY}", text)
    path = tmp / "gateway.yaml"
    path.write_text(text)
    return path


def reset_peaks(cli_pid: int) -> dict[int, int]:
    """Each process's high-water mark reset to its RSS now; that RSS (KiB) per pid."""
    children = subprocess.run(["pgrep", "-P", str(cli_pid)], capture_output=True, text=True).stdout.split()
    pids = [cli_pid, *map(int, children)]
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    return {pid: kib(pid, "VmRSS") for pid in pids}


def report(before: dict[int, int]) -> None:
    for pid, rss in before.items():
        command = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
        print(f"pid {pid} ({command[:70]}): RSS {rss / 1024:.1f} MiB before, "
              f"peak growth {(kib(pid, 'VmHWM') - rss) / 1024:.1f} MiB")


async def measure(base: str, cli_pid: int) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession() as s:
        deadline = time.monotonic() + 60
        while True:
            try:
                async with s.get(base + "/healthz") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)
        new_user = {"name": "rss", "quota_usd": 1000}
        async with s.post(base + "/admin/users", json=new_user, headers=admin) as r:
            user = await r.json()
        new_key = {"user_id": user["id"], "name": "rss"}
        async with s.post(base + "/admin/keys", json=new_key, headers=admin) as r:
            auth = {"Authorization": f"Bearer {(await r.json())['key']}"}
        body = {"model": "videos-standard", "prompt": f"a long one sim:dur100 sim:kb{SIZE_KB}"}
        async with s.post(base + "/v1/videos", json=body, headers=auth) as r:
            video_id = (await r.json())["id"]
        while True:
            async with s.get(f"{base}/v1/videos/{video_id}", headers=auth) as r:
                video = await r.json()
            if video["status"] in ("completed", "failed"):
                break
            await asyncio.sleep(0.2)
        assert video["status"] == "completed", video
        before = reset_peaks(cli_pid)
        size, started = 0, time.monotonic()
        async with s.get(video["video_url"]) as r:
            assert r.status == 200, r.status
            async for piece in r.content.iter_chunked(1 << 20):
                size += len(piece)
        took = time.monotonic() - started
        report(before)
        print(f"{size / 2**20:.0f} MiB downloaded in {took:.1f} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        config = write_config(Path(tmp), port, free_port())
        cli = Path(sys.executable).parent / "gateway"
        proc = subprocess.Popen([str(cli), "serve", "--config", str(config)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            asyncio.run(measure(f"http://127.0.0.1:{port}", proc.pid))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
