"""Read load on the REST service while a sweep trains: every read route, from a cold start, new-connection clients
beside keep-alive ones; counts of errors and timeouts, p50/p99 per route, the service's memory (docs/load.md).

By default the script starts `scalesweep serve` on loopback with a fresh workdir and first runs a tiny study to the
end (a two-point sweep and its two-rung transfer, tiny trials: about two minutes), so that the finished sweep's
`/best` and `/export` and the transfer's `/runs`, `/fits`, `/predict`, `/report` and `/export` have real answers.
It then restarts the service (cold: empty caches, nothing read yet), submits `--spec` and, as soon as its first
trials train, starts the clients without reading anything first:

- `--new-clients` clients open a new connection for every request (`Connection: close`), as a polling script
  or a browser tab after a restart does;
- `--clients` clients keep one connection alive each;

each goes round every read route with no pause (or `--think` seconds between rounds) for `--warmup` +
`--duration` seconds. Every answer counts towards the status counts, 5xx and timeouts (a request with no answer
within `--timeout` s); the latencies of the first `--warmup` seconds (the cold reads) are left out of p50/p99.
p99 of the cached reads is set against the 50 ms target, with the CPU printed beside it. `--soak SECONDS` runs the
load that long instead of `--duration` and reports the service's resident memory at the start and the end.
Sixty clients with no pause queue in front of any server, so their latencies are mostly the queue's; after the
load, `--probe N` reads every route N times from one client alone (the sweep still training), which measures the
cached reads themselves against the target.

    python benchmarks/api_load.py [--new-clients 50] [--clients 10] [--warmup 5] [--duration 60] [--think 0]
                                  [--timeout 10] [--soak SECONDS] [--probe 50] [--spec examples/sweep-tiny.yaml]
                                  [--set horizon=600] [--no-study] [--workdir DIR] [--server URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from trials.core.proctree import free_port

ROOT = Path(__file__).resolve().parents[1]
TARGET_P99_MS = 50.0

# The study whose finished sweep and transfer give the finished-job routes real answers: tiny trials (seconds).
_TINY_TRIAL: dict[str, Any] = {
    "batch_size": 8, "warmup_steps": 2, "log_every": 3, "text_encoder": "learned",
    "eval": {"extractor": "pixels", "extractor_options": {"size": 4}, "fd_samples": 64, "reference_samples": 128,
             "sample_steps": 2, "val_samples": 16},
}
STUDY_SWEEP: dict[str, Any] = {
    "name": "api-load-study", "rung": "cpu-xs", "horizon": 6, "search": {"space": {"K": [3], "gamma": [0.25]}},
    "baselines": ["adamw"], "backend": {"name": "builtin", "checkpoints": False},
    "execution": {"concurrency": 2, "num_cpus": 2}, "trial": _TINY_TRIAL, "tracking": {"experiment": "api-load"},
}
STUDY_TRANSFER: dict[str, Any] = {"rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "adamw"], "seeds": [0]}


def cpu_description() -> str:
    """Model, logical cores and the vector features that matter here (from /proc/cpuinfo on Linux)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    wanted = ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]
    features = " ".join(f for f in wanted if f in flags) or "none of avx2/avx512f/avx512_bf16/amx_bf16"
    return f"{model}, {os.cpu_count()} logical cores, {features}"


def start_service(workdir: Path, token: str, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = port or free_port("127.0.0.1")
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


def stop_service(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (Linux /proc), its children not included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of one process in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str,
               close: bool) -> int:
    """One HTTP/1.1 GET; returns the status. Hand-written rather than httpx so that the load generator, which shares
    the cores with the service and the sweep, spends microseconds per request."""
    extra = "Connection: close\r\n" if close else ""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n{extra}\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is not None:
        await reader.readexactly(length)
    elif close:
        await reader.read()
    return status


class Tally:
    """Per route: latencies of answered requests after the warm-up, status counts and timeouts over the whole run."""

    def __init__(self, routes: list[str]) -> None:
        self.samples: dict[str, list[float]] = {r: [] for r in routes}
        self.statuses: dict[str, dict[int, int]] = {r: {} for r in routes}
        self.timeouts: dict[str, int] = dict.fromkeys(routes, 0)
        self.broken: dict[str, int] = dict.fromkeys(routes, 0)  # connection refused or dropped

    def add(self, route: str, status: int | None, start: float, elapsed_ms: float, measure_from: float) -> None:
        if status is None:
            return
        self.statuses[route][status] = self.statuses[route].get(status, 0) + 1
        if start >= measure_from and status < 500:
            self.samples[route].append(elapsed_ms)


async def _client(base: str, paths: dict[str, str], tally: Tally, measure_from: float, until: float, think: float,
                  timeout: float, new_connections: bool) -> None:
    url = httpx.URL(base)
    host = f"{url.host}:{url.port}"
    jitter = random.Random()
    order = list(paths)
    jitter.shuffle(order)  # every route under load at once, not 60 clients in lockstep
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    while time.perf_counter() < until:
        for route in order:
            start = time.perf_counter()
            status = None
            try:
                if conn is None:
                    conn = await asyncio.wait_for(asyncio.open_connection(url.host, url.port), timeout)
                status = await asyncio.wait_for(_get(*conn, host, paths[route], new_connections), timeout)
            except TimeoutError:
                tally.timeouts[route] += 1
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                tally.broken[route] += 1
            if conn is not None and (new_connections or status is None):
                conn[1].close()
                conn = None
            tally.add(route, status, start, (time.perf_counter() - start) * 1e3, measure_from)
            if time.perf_counter() >= until:
                break
        if think:
            await asyncio.sleep(think * jitter.uniform(0.8, 1.2))
    if conn is not None:
        conn[1].close()


async def load(base: str, paths: dict[str, str], new_clients: int, clients: int, warmup: float, duration: float,
               think: float, timeout: float) -> Tally:
    tally = Tally(list(paths))
    measure_from = time.perf_counter() + warmup
    until = measure_from + duration
    await asyncio.gather(
        *(_client(base, paths, tally, measure_from, until, think, timeout, True) for _ in range(new_clients)),
        *(_client(base, paths, tally, measure_from, until, think, timeout, False) for _ in range(clients)))
    return tally


async def probe(base: str, paths: dict[str, str], n: int, timeout: float) -> dict[str, list[float]]:
    """Each route `n` times in turn from one keep-alive client, nothing else reading: the latency of a cached read
    itself, without the queue that many clients with no pause build in front of any server."""
    url = httpx.URL(base)
    host = f"{url.host}:{url.port}"
    reader, writer = await asyncio.open_connection(url.host, url.port)
    latencies: dict[str, list[float]] = {}
    try:
        for route, path in paths.items():
            for _ in range(n):
                start = time.perf_counter()
                await asyncio.wait_for(_get(reader, writer, host, path, False), timeout)
                latencies.setdefault(route, []).append((time.perf_counter() - start) * 1e3)
    finally:
        writer.close()
    return latencies


def run_study(http: httpx.Client, auth: dict[str, str]) -> tuple[str, str]:
    """The tiny sweep to SUCCEEDED and its transfer to SUCCEEDED; returns their ids."""
    def wait(path: str, limit: float) -> dict[str, Any]:
        deadline = time.time() + limit
        while time.time() < deadline:
            body = http.get(path).json()
            if body["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                if body["state"] != "SUCCEEDED":
                    raise SystemExit(f"{path} ended {body['state']}: {body.get('error')}")
                return body
            time.sleep(1)
        raise SystemExit(f"{path} did not finish within {limit:g} s")

    created = http.post("/v1/sweeps", json=STUDY_SWEEP, headers=auth)
    if created.status_code not in (200, 201):
        raise SystemExit(f"study sweep refused: {created.status_code} {created.text[:300]}")
    sweep_id = created.json()["id"]
    wait(f"/v1/sweeps/{sweep_id}", 600)
    created = http.post("/v1/transfers", json={**STUDY_TRANSFER, "sweep_id": sweep_id}, headers=auth)
    if created.status_code not in (200, 201):
        raise SystemExit(f"study transfer refused: {created.status_code} {created.text[:300]}")
    transfer_id = created.json()["id"]
    wait(f"/v1/transfers/{transfer_id}", 900)
    return sweep_id, transfer_id


def find_study(http: httpx.Client) -> tuple[str, str] | None:
    """A finished study already in the workdir (an earlier run with --workdir): its sweep and transfer ids."""
    for sweep in http.get("/v1/sweeps", params={"state": "SUCCEEDED", "limit": 200}).json()["data"]:
        if sweep["name"] != STUDY_SWEEP["name"]:
            continue
        done = http.get("/v1/transfers", params={"sweep_id": sweep["id"], "state": "SUCCEEDED"}).json()["data"]
        if done:
            return sweep["id"], done[0]["id"]
    return None


def read_paths(training: str, study: tuple[str, str] | None) -> dict[str, str]:
    s = f"/v1/sweeps/{training}"
    paths = {"GET /v1/health": "/v1/health", "GET /v1/sweeps": "/v1/sweeps?limit=20", "GET /v1/sweeps/{id}": s,
             "GET /v1/sweeps/{id}/trials": f"{s}/trials", "GET /v1/sweeps/{id}/best (training)": f"{s}/best",
             "GET /v1/transfers": "/v1/transfers"}
    if study is not None:
        done, t = f"/v1/sweeps/{study[0]}", f"/v1/transfers/{study[1]}"
        paths |= {"GET /v1/sweeps/{id}/best (done)": f"{done}/best",
                  "GET /v1/sweeps/{id}/export": f"{done}/export?rung=cpu-s",
                  "GET /v1/transfers/{id}": t, "GET /v1/transfers/{id}/runs": f"{t}/runs",
                  "GET /v1/transfers/{id}/fits": f"{t}/fits",
                  "GET /v1/transfers/{id}/predict": f"{t}/predict?size=cpu-s&arm=periodic",
                  "GET /v1/transfers/{id}/report": f"{t}/report", "GET /v1/transfers/{id}/export": f"{t}/export"}
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="target this service (token from $SCALESWEEP_API_TOKEN) instead of one "
                        "started here (no restart: its caches are as they are)")
    parser.add_argument("--spec", default=str(ROOT / "examples" / "sweep-tiny.yaml"),
                        help="the sweep that trains during the load")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a top-level field of --spec, e.g. horizon=600")
    parser.add_argument("--new-clients", type=int, default=50, help="clients opening a new connection per request")
    parser.add_argument("--clients", type=int, default=10, help="clients keeping one connection alive each")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load measured")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="first seconds of load whose latencies are not in p50/p99 (errors still count)")
    parser.add_argument("--think", type=float, default=0.0, help="seconds each client pauses between rounds")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before a request counts as timed out")
    parser.add_argument("--soak", type=float, metavar="SECONDS", help="run the load this long (e.g. 600) instead "
                        "of --duration and report the service's memory at the start and the end")
    parser.add_argument("--no-study", action="store_true", help="skip the finished study: only the training "
                        "sweep's routes and the lists are read")
    parser.add_argument("--workdir", type=Path, help="the service's workdir (default: a new temporary one); a "
                        "finished study found there is reused instead of run again")
    parser.add_argument("--probe", type=int, default=50, metavar="N",
                        help="after the load, read each route N times from one client, nothing else reading (the "
                        "cached reads' own latency, beside the sweep that trains); 0 skips it")
    parser.add_argument("--keep", action="store_true", help="let the sweep finish (default: cancel it)")
    args = parser.parse_args()
    duration = args.soak if args.soak else args.duration

    spec: dict[str, Any] = yaml.safe_load(Path(args.spec).read_text())
    for item in args.set:
        key, _, value = item.partition("=")
        spec[key] = yaml.safe_load(value)
    print(f"CPU: {cpu_description()}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    token = os.environ.get("SCALESWEEP_API_TOKEN", "api-load-benchmark-token")
    auth = {"Authorization": f"Bearer {token}"}
    proc = None
    study: tuple[str, str] | None = None
    if args.server:
        base = args.server.rstrip("/")
    else:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="scalesweep-api-load-"))
        print(f"workdir: {workdir}")
        proc, base = start_service(workdir, token)
        if not args.no_study:
            t0 = time.time()
            with httpx.Client(base_url=base, timeout=60) as http:
                study = find_study(http) or run_study(http, auth)
            print(f"study: sweep {study[0]} and transfer {study[1]} SUCCEEDED (ready after {time.time() - t0:.0f} s);"
                  " restarting the service (cold start)")
        if proc is not None:  # always from a fresh process: nothing read, nothing cached
            stop_service(proc)
            proc, base = start_service(workdir, token)
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            created = http.post("/v1/sweeps", json=spec, headers=auth)
            if created.status_code != 201:
                raise SystemExit(f"submit failed: {created.status_code} {created.text[:300]}")
            sweep_id = created.json()["id"]
            deadline = time.time() + 300
            while time.time() < deadline:  # load once trials train; nothing reads the result before the clients
                body = http.get(f"/v1/sweeps/{sweep_id}").json()
                if body["state"] != "PENDING" and body["progress"].get("RUNNING", 0) > 0:
                    break
                if body["state"] in ("FAILED", "CANCELLED", "SUCCEEDED"):
                    raise SystemExit(f"sweep ended {body['state']} before the load started: {body.get('error')}")
                time.sleep(0.5)
            paths = read_paths(sweep_id, study)
            print(f"sweep {sweep_id} {body['state']}, progress {body['progress']}; {args.new_clients} "
                  f"new-connection + {args.clients} keep-alive clients over {len(paths)} routes, "
                  f"{args.warmup:g} s warm-up then {duration:g} s measured, think {args.think:g} s, "
                  f"timeout {args.timeout:g} s")
            cpu0 = cpu_seconds(proc.pid) if proc is not None else None
            rss0 = rss_mib(proc.pid) if proc is not None else None
            tally = asyncio.run(load(base, paths, args.new_clients, args.clients, args.warmup, duration,
                                     args.think, args.timeout))
            rss1 = rss_mib(proc.pid) if proc is not None else None
            if cpu0 is not None and proc is not None:
                answered = sum(sum(v.values()) for v in tally.statuses.values())
                used = cpu_seconds(proc.pid) - cpu0
                print(f"service process: {used:.1f} CPU s for {answered} answers, about "
                      f"{used / max(answered, 1) * 1e3:.2f} CPU ms per request (the load generator and the sweep "
                      "share the same cores)")
            if rss0 is not None:
                print(f"service resident memory: {rss0:.0f} MiB at the start of the load, {rss1:.0f} MiB at the end")
            t0 = time.perf_counter()
            after = http.get(f"/v1/sweeps/{sweep_id}")
            print(f"right after the load: GET /v1/sweeps/{{id}} {after.status_code} in "
                  f"{(time.perf_counter() - t0) * 1e3:.0f} ms; sweep {after.json()['state']}, progress "
                  f"{after.json()['progress']}")
            print(f"\nCPU: {cpu_description()}")
            print(f"| route | answers | statuses | 5xx | timeouts | broken | req/s | p50 ms | p99 ms | max ms | "
                  f"p99 <= {TARGET_P99_MS:g} ms |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            total_5xx = total_timeouts = total_broken = 0
            for route, values in tally.samples.items():
                statuses = tally.statuses[route]
                n = sum(statuses.values())
                bad = sum(c for s, c in statuses.items() if s >= 500)
                total_5xx += bad
                total_timeouts += tally.timeouts[route]
                total_broken += tally.broken[route]
                codes = " ".join(f"{s}:{c}" for s, c in sorted(statuses.items()))
                head = f"| {route} | {n} | {codes} | {bad} | {tally.timeouts[route]} | {tally.broken[route]} | " \
                       f"{n / (duration + args.warmup):.0f} |"
                if not values:
                    print(f"{head} - | - | - | no answers after the warm-up |")
                    continue
                p50, p99 = statistics.median(values), percentile(values, 99)
                print(f"{head} {p50:.1f} | {p99:.1f} | {max(values):.1f} | {'yes' if p99 <= TARGET_P99_MS else 'no'} |")
            print(f"\ntotal: {total_5xx} 5xx, {total_timeouts} timeouts, {total_broken} broken connections")
            if args.probe:
                alone = asyncio.run(probe(base, paths, args.probe, args.timeout))
                print(f"\ncached reads one at a time, the sweep still training ({args.probe} per route, one keep-alive"
                      f" client, nothing else reading); CPU: {cpu_description()}")
                print(f"| route | p50 ms | p99 ms | max ms | p99 <= {TARGET_P99_MS:g} ms |")
                print("|---|---|---|---|---|")
                for route, values in alone.items():
                    p99 = percentile(values, 99)
                    print(f"| {route} | {statistics.median(values):.1f} | {p99:.1f} | {max(values):.1f} | "
                          f"{'yes' if p99 <= TARGET_P99_MS else 'no'} |")
            if not args.keep:
                http.post(f"/v1/sweeps/{sweep_id}/cancel", headers=auth)
    finally:
        if proc is not None:
            stop_service(proc)


if __name__ == "__main__":
    main()
