"""The HTTPS upstream scenario (issue 32): same-format chat with the upstream behind TLS on the
loopback, a test CA's certificate (bench/tls.py). A TLS front of the replay (bench/replay.py, in
front of the plain one, so nothing is recorded twice from the simulator) serves it; a gateway and a
floor started for this scenario reach it over https and trust the CA through ``SSL_CERT_FILE``
in their environment. Measured as the plain scenarios are (wrk, rounds in turn, medians), with the
upstream called directly over https as the base of the added latency.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench import measure, procs, tls
from bench.measure import Target
from bench.report import Row
from bench.scenarios import Scenario


def run(tmp: Path, plain_upstream: str, server: str, admin_key: str, make_key: Callable[[str], str],
        log: Path, scenario: Scenario, concurrencies: tuple[int, ...], seconds: float,
        rounds: int) -> list[Row]:
    authority = tls.make_authority(tmp)
    tls_port, gw_port, floor_port = procs.free_port(), procs.free_port(), procs.free_port()
    upstream = f"https://127.0.0.1:{tls_port}"
    server_files = (authority.cert_chain_pem, authority.key_pem)
    started = [procs.start_replay(tls_port, plain_upstream, log, server_files)]
    try:
        config = procs.write_config(tmp, "https", gw_port, tls_port, admin_key, upstream=upstream)
        started.append(procs.start_gateway(config, gw_port, server, log, authority.client_env()))
        started.append(procs.start_floor(server, floor_port, upstream, log, authority.client_env()))
        direct = Target("direct", upstream, None, "sk-sim", True)
        floor = Target("floor", f"http://127.0.0.1:{floor_port}", started[2].pid, "none", True)
        gateway = Target("gateway", f"http://127.0.0.1:{gw_port}", started[1].pid,
                         make_key(f"http://127.0.0.1:{gw_port}"), False)
        chunks = measure.check(gateway, scenario)
        measure.check(floor, scenario)
        return [Row(scenario, conc, chunks, *measure.interleaved((direct, floor, gateway), scenario, conc,
                                                                 seconds, rounds))
                for conc in concurrencies]
    finally:
        for proc in reversed(started):
            procs.stop(proc)
