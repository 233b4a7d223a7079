"""Read latency of the REST service under load: `GET /v1/sweeps/{id}` and `/trials` while a real sweep trains.

Starts `scalesweep serve` on loopback with a fresh workdir (or targets `--server` with $SCALESWEEP_API_TOKEN),
submits a tiny sweep, waits until its first trials run, then `--clients` concurrent clients (asyncio, one kept-alive
connection each, a minimal HTTP/1.1 client) each poll both routes, pausing `--think` seconds between rounds, for
`--warmup` + `--duration` seconds. The sweep trains on the same cores the whole time. Prints p50/p99 per route and
whether p99 <= 50 ms (the target).

    python benchmarks/api_load.py [--clients 50] [--warmup 3] [--duration 20] [--think 0]
                                  [--spec examples/sweep-tiny.yaml] [--server URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
TARGET_P99_MS = 50.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_service(workdir: Path, token: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "SCALESWEEP_API_TOKEN": token, "SCALESWEEP_WORKDIR": str(workdir),
           "SCALESWEEP_POLL_INTERVAL_S": "0.5"}
    proc = subprocess.Popen([sys.executable, "-m", "scalesweep_cli", "serve", "--port", str(port),
                             "--log-level", "warning"], cwd=ROOT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the service did not start within 120 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (Linux /proc), its children not included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str) -> int:
    """One HTTP/1.1 GET on a kept-alive connection; returns the status. Hand-written rather than httpx so that the
    load generator, which shares the cores with the service and the sweep, spends microseconds per request."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _client(base: str, paths: dict[str, str], measure_from: float, until: float, think: float,
                  samples: dict[str, list[float]], errors: list[str]) -> None:
    url = httpx.URL(base)
    jitter = random.Random()
    await asyncio.sleep(jitter.uniform(0, think))  # independent pollers, not one burst of 50 per period
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        while time.perf_counter() < until:
            for route, path in paths.items():
                start = time.perf_counter()
                code = await _get(reader, writer, f"{url.host}:{url.port}", path)
                elapsed = (time.perf_counter() - start) * 1e3
                if start < measure_from:
                    continue  # the warm-up: 50 connections opening at once, not the steady state
                if code == 200:
                    samples[route].append(elapsed)
                else:
                    errors.append(f"{route}: {code}")
            if think:
                await asyncio.sleep(think * jitter.uniform(0.8, 1.2))
    finally:
        writer.close()


async def load(base: str, sweep_id: str, clients: int, warmup: float, duration: float,
               think: float) -> dict[str, list[float]]:
    paths = {"GET /v1/sweeps/{id}": f"/v1/sweeps/{sweep_id}", "GET /v1/sweeps/{id}/trials":
             f"/v1/sweeps/{sweep_id}/trials"}
    samples: dict[str, list[float]] = {route: [] for route in paths}
    errors: list[str] = []
    measure_from = time.perf_counter() + warmup
    until = measure_from + duration
    await asyncio.gather(*(_client(base, paths, measure_from, until, think, samples, errors) for _ in range(clients)))
    if errors:
        print(f"{len(errors)} non-200 answers, e.g. {errors[:3]}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="target this service (token from $SCALESWEEP_API_TOKEN) instead of one "
                        "started here")
    parser.add_argument("--spec", default=str(ROOT / "examples" / "sweep-tiny.yaml"))
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load measured")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring")
    parser.add_argument("--think", type=float, default=0.0, help="seconds each client pauses between rounds")
    parser.add_argument("--keep", action="store_true", help="let the sweep finish (default: cancel it)")
    args = parser.parse_args()

    token = os.environ.get("SCALESWEEP_API_TOKEN", "api-load-benchmark-token")
    proc = None
    if args.server:
        base = args.server.rstrip("/")
    else:
        proc, base = start_service(Path(tempfile.mkdtemp(prefix="scalesweep-api-load-")), token)
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            spec: dict[str, Any] = yaml.safe_load(Path(args.spec).read_text())
            created = http.post("/v1/sweeps", json=spec, headers=auth)
            if created.status_code != 201:
                raise SystemExit(f"submit failed: {created.status_code} {created.text[:300]}")
            sweep_id = created.json()["id"]
            deadline = time.time() + 180
            while time.time() < deadline:  # load once trials train, so /trials has MLflow runs to read
                body = http.get(f"/v1/sweeps/{sweep_id}").json()
                if body["state"] != "PENDING" and body["progress"].get("RUNNING", 0) > 0:
                    break
                if body["state"] in ("FAILED", "CANCELLED", "SUCCEEDED"):
                    raise SystemExit(f"sweep ended {body['state']} before the load started: {body.get('error')}")
                time.sleep(0.5)
            for path in (f"/v1/sweeps/{sweep_id}", f"/v1/sweeps/{sweep_id}/trials"):  # warm: a running service
                http.get(path)  # has read MLflow (and imported its client) long before anyone polls
            print(f"sweep {sweep_id} {body['state']}, progress {body['progress']}; "
                  f"{args.clients} clients, {args.warmup:g} s warm-up then {args.duration:g} s measured, "
                  f"think {args.think:g} s")
            cpu0 = cpu_seconds(proc.pid) if proc is not None else None
            samples = asyncio.run(load(base, sweep_id, args.clients, args.warmup, args.duration, args.think))
            if cpu0 is not None and proc is not None:  # the warm-up's requests are in the CPU time but not counted
                answered = sum(len(v) for v in samples.values()) * (args.duration + args.warmup) / args.duration
                used = cpu_seconds(proc.pid) - cpu0
                print(f"service process: {used:.1f} CPU s, about {used / max(answered, 1) * 1e3:.2f} CPU ms per "
                      f"request (the load generator and the sweep share the same cores)")
            after = http.get(f"/v1/sweeps/{sweep_id}").json()
            print(f"sweep {after['state']}, progress {after['progress']} after the load")
            print(f"| route | requests | req/s | p50 ms | p99 ms | max ms | p99 <= {TARGET_P99_MS:g} ms |")
            print("|---|---|---|---|---|---|---|")
            for route, values in samples.items():
                if not values:
                    print(f"| {route} | 0 | - | - | - | - | no answers |")
                    continue
                p50, p99 = statistics.median(values), percentile(values, 99)
                print(f"| {route} | {len(values)} | {len(values) / args.duration:.0f} | {p50:.1f} | {p99:.1f} | "
                      f"{max(values):.1f} | {'yes' if p99 <= TARGET_P99_MS else 'no'} |")
            if not args.keep:
                http.post(f"/v1/sweeps/{sweep_id}/cancel", headers=auth)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
