"""A typed Python client for the scalesweep service (httpx).

    from api.client import ScalesweepClient, ApiError
    with ScalesweepClient("http://127.0.0.1:8000", token=os.environ["SCALESWEEP_API_TOKEN"]) as c:
        sweep = c.submit_sweep("examples/sweep-tiny.yaml", idempotency_key="tiny-1")
        for snapshot in c.follow(sweep.id):       # one SweepPublic per poll until a terminal state
            print(snapshot.state, snapshot.progress, snapshot.best_so_far)
        print(c.sweep_best(sweep.id)["best"])     # e.g. {"K": 3, "gamma": 0.15}

Every failure is one exception, `ApiError`, carrying the problem+json fields (`title`, `status`, `detail`,
`errors`); when no answer came back at all (connection refused, timeout) `status` is None. Imports only httpx,
pydantic and the response schemas: nothing of the service itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from api.schemas import (
    Prediction,
    RunsPublic,
    SweepPublic,
    SweepsPublic,
    TransferPublic,
    TransfersPublic,
    TrialsPublic,
)
from trials.core import ScalesweepError, read_mapping

__all__ = ["DEFAULT_SERVER", "TERMINAL", "ApiError", "ScalesweepClient"]

DEFAULT_SERVER = "http://127.0.0.1:8000"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})

_M = TypeVar("_M", bound=BaseModel)


class ApiError(ScalesweepError):
    """A request the service refused or could not answer: the RFC 9457 problem fields, flattened.

    `status` is the HTTP status, or None when no response came back (connection refused, timeout); `errors` lists
    each invalid field of a 422 as {"field", "message", ...}."""

    def __init__(self, title: str, status: int | None, detail: str, *, errors: list[dict[str, Any]] | None = None,
                 type: str = "about:blank", instance: str | None = None) -> None:
        self.title, self.status, self.detail = title, status, detail
        self.errors = list(errors or [])
        self.type, self.instance = type, instance
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.status} {self.title}" if self.status is not None else self.title
        return f"{head}: {self.detail}" if self.detail else head

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):  # not a problem document (a proxy's HTML page, ...): say what came back
            text = " ".join(response.text.split())[:300]
            return cls(response.reason_phrase or "Error", response.status_code, text)
        return cls(str(body.get("title") or response.reason_phrase or "Error"),
                   int(body.get("status") or response.status_code), str(body.get("detail") or ""),
                   errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
                   type=str(body.get("type") or "about:blank"), instance=body.get("instance"))


def _load_spec(spec: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """A spec mapping, or a YAML/JSON file holding one."""
    if isinstance(spec, Mapping):
        return dict(spec)

    def invalid(message: str) -> ApiError:
        return ApiError("Invalid Spec", None, message)

    return read_mapping(spec, what="a spec (a mapping of fields)", error=invalid, missing=invalid)


class ScalesweepClient:
    """The service's resources as typed calls; responses are the service's own schemas (`api.schemas`)."""

    def __init__(self, base_url: str = DEFAULT_SERVER, token: str | None = None, timeout: float = 30.0, *,
                 user: str | None = None, http: httpx.Client | None = None) -> None:
        """`http` replaces the underlying httpx client (e.g. a FastAPI TestClient, which is one); `base_url` and
        `timeout` are then its own."""
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if user:
            headers["X-Scalesweep-User"] = user
        self._http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self._http.headers.update(headers)
        self.base_url = str(self._http.base_url).rstrip("/")

    def __enter__(self) -> ScalesweepClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- plumbing ----------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ApiError("Timeout", None, f"{self.base_url} did not answer {method} {path} in time") from None
        except httpx.ConnectError as exc:
            reason = str(exc) or "connection failed"
            raise ApiError("Service Unreachable", None, f"cannot connect to {self.base_url}: {reason}") from None
        except httpx.HTTPError as exc:
            raise ApiError("Request Failed", None, f"{method} {path}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ApiError("Bad Response", response.status_code, f"{path}: the answer is not JSON") from None

    def _model(self, model: type[_M], method: str, path: str, **kwargs: Any) -> _M:
        body = self._json(method, path, **kwargs)
        try:
            return model.model_validate(body)
        except ValidationError as exc:  # a service of another version: say so rather than hand back half a model
            raise ApiError("Bad Response", None, f"{path}: not a {model.__name__}: {exc.errors()[:3]}") from None

    @staticmethod
    def _idempotency(key: str | None) -> dict[str, str]:
        return {"Idempotency-Key": key} if key else {}

    # --- health ------------------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return dict(self._json("GET", "/v1/health"))

    # --- sweeps ------------------------------------------------------------------------------------------------

    def submit_sweep(self, spec: Mapping[str, Any] | str | Path, idempotency_key: str | None = None) -> SweepPublic:
        """Submit a sweep spec (a mapping or a YAML/JSON file); with a key, a retry returns the first sweep."""
        return self._model(SweepPublic, "POST", "/v1/sweeps", json=_load_spec(spec),
                           headers=self._idempotency(idempotency_key))

    def get_sweep(self, sweep_id: str) -> SweepPublic:
        return self._model(SweepPublic, "GET", f"/v1/sweeps/{sweep_id}")

    def list_sweeps(self, state: str | None = None, limit: int = 50, cursor: str | None = None) -> SweepsPublic:
        params: dict[str, Any] = {"limit": limit, **({"state": state} if state else {}),
                                  **({"cursor": cursor} if cursor else {})}
        return self._model(SweepsPublic, "GET", "/v1/sweeps", params=params)

    def sweep_trials(self, sweep_id: str) -> TrialsPublic:
        return self._model(TrialsPublic, "GET", f"/v1/sweeps/{sweep_id}/trials")

    def sweep_best(self, sweep_id: str) -> dict[str, Any]:
        """The chosen point (`best`), its rank table, gap and seed spread; 409 before any point is scored."""
        return dict(self._json("GET", f"/v1/sweeps/{sweep_id}/best"))

    def sweep_importance(self, sweep_id: str, evaluator: str = "fanova", n_boot: int = 100) -> dict[str, Any]:
        """Which searched parameter mattered (`GET /v1/sweeps/{id}/importance`)."""
        return dict(self._json("GET", f"/v1/sweeps/{sweep_id}/importance",
                               params={"evaluator": evaluator, "n_boot": n_boot}))

    def sweep_front(self, sweep_id: str) -> dict[str, Any]:
        """The quality-cost front (`GET /v1/sweeps/{id}/front`)."""
        return dict(self._json("GET", f"/v1/sweeps/{sweep_id}/front"))

    def compare_sweeps(self, sweep_id: str, other_id: str) -> dict[str, Any]:
        """Two sweeps side by side, other - this (`GET /v1/sweeps/{id}/compare/{other_id}`)."""
        return dict(self._json("GET", f"/v1/sweeps/{sweep_id}/compare/{other_id}"))

    def write_optuna(self, sweep_id: str) -> dict[str, Any]:
        """Write the sweep to the service's Optuna storage (`POST /v1/sweeps/{id}/optuna`)."""
        return dict(self._json("POST", f"/v1/sweeps/{sweep_id}/optuna"))

    def extend_sweep(self, sweep_id: str, spec: Mapping[str, Any] | str | Path) -> dict[str, Any]:
        """Extend a finished sweep to `spec` (`POST /v1/sweeps/{id}/extend`): the sweep, with `added`."""
        return dict(self._json("POST", f"/v1/sweeps/{sweep_id}/extend", json=_load_spec(spec)))

    def extend_transfer(self, transfer_id: str, seeds: list[int]) -> dict[str, Any]:
        """Add seeds to a finished transfer (`POST /v1/transfers/{id}/extend`; `seeds`: its seeds and the new ones):
        the transfer, with `added`."""
        return dict(self._json("POST", f"/v1/transfers/{transfer_id}/extend", json={"seeds": list(seeds)}))

    def cancel_sweep(self, sweep_id: str) -> SweepPublic:
        return self._model(SweepPublic, "POST", f"/v1/sweeps/{sweep_id}/cancel")

    def resume_sweep(self, sweep_id: str) -> SweepPublic:
        return self._model(SweepPublic, "POST", f"/v1/sweeps/{sweep_id}/resume")

    def follow(self, sweep_id: str, interval: float = 2.0, timeout: float | None = None) -> Iterator[SweepPublic]:
        """A snapshot of the sweep per poll, the last one in a terminal state (ApiError with status None when
        `timeout` seconds pass first)."""
        yield from self._follow(self.get_sweep, sweep_id, interval, timeout)

    def wait(self, sweep_id: str, interval: float = 2.0, timeout: float | None = None) -> SweepPublic:
        """The sweep once it is SUCCEEDED, FAILED or CANCELLED."""
        *_, last = self.follow(sweep_id, interval, timeout)  # follow yields at least once or raises
        return last

    # --- transfers ---------------------------------------------------------------------------------------------

    def submit_transfer(self, sweep_id: str, rungs: list[str], *, arms: list[str] | None = None,
                        horizon_factor: float | None = None, seeds: list[int] | None = None,
                        idempotency_key: str | None = None, **fields: Any) -> TransferPublic:
        """Transfer a SUCCEEDED sweep's choice to `rungs` (409 while the sweep is not finished). `fields` may set
        the other TransferCreate fields (name, steps, lr_rules, execution, trial)."""
        body = {"sweep_id": sweep_id, "rungs": list(rungs), "arms": arms, "horizon_factor": horizon_factor,
                "seeds": seeds, **fields}
        return self._model(TransferPublic, "POST", "/v1/transfers",
                           json={k: v for k, v in body.items() if v is not None},
                           headers=self._idempotency(idempotency_key))

    def get_transfer(self, transfer_id: str) -> TransferPublic:
        return self._model(TransferPublic, "GET", f"/v1/transfers/{transfer_id}")

    def list_transfers(self, state: str | None = None, sweep_id: str | None = None, limit: int = 50,
                       cursor: str | None = None) -> TransfersPublic:
        params: dict[str, Any] = {"limit": limit}
        params.update({k: v for k, v in (("state", state), ("sweep_id", sweep_id), ("cursor", cursor)) if v})
        return self._model(TransfersPublic, "GET", "/v1/transfers", params=params)

    def transfer_runs(self, transfer_id: str) -> RunsPublic:
        return self._model(RunsPublic, "GET", f"/v1/transfers/{transfer_id}/runs")

    def cancel_transfer(self, transfer_id: str) -> TransferPublic:
        return self._model(TransferPublic, "POST", f"/v1/transfers/{transfer_id}/cancel")

    def resume_transfer(self, transfer_id: str) -> TransferPublic:
        return self._model(TransferPublic, "POST", f"/v1/transfers/{transfer_id}/resume")

    def follow_transfer(self, transfer_id: str, interval: float = 2.0,
                        timeout: float | None = None) -> Iterator[TransferPublic]:
        yield from self._follow(self.get_transfer, transfer_id, interval, timeout)

    def wait_transfer(self, transfer_id: str, interval: float = 2.0, timeout: float | None = None) -> TransferPublic:
        *_, last = self.follow_transfer(transfer_id, interval, timeout)
        return last

    # --- fits, predictions, exports, report ----------------------------------------------------------------------

    def transfer_fits(self, transfer_id: str, metric: str | None = None) -> dict[str, Any]:
        """Time to best and FD per arm, savings, and the scaling fits with intervals and flags (JSON document)."""
        params = {"metric": metric} if metric else None
        return dict(self._json("GET", f"/v1/transfers/{transfer_id}/fits", params=params))

    def predict(self, transfer_id: str, size: float | str, arm: str, metric: str | None = None) -> Prediction:
        """Point and interval at model size `size` (a parameter count or a rung name); a refused extrapolation is
        an ApiError with status 422 whose detail says why."""
        params: dict[str, Any] = {"size": size, "arm": arm, **({"metric": metric} if metric else {})}
        return self._model(Prediction, "GET", f"/v1/transfers/{transfer_id}/predict", params=params)

    def export(self, transfer_id: str, rung: str | None = None, format: Literal["yaml", "json"] = "yaml", *,
               allow_losing: bool = False) -> str:
        """The transferred hyperparameters for `rung` (default: the transfer's largest) as YAML or JSON text; a
        choice worse than a baseline with confidence is refused (409) unless `allow_losing`."""
        params = {"format": format, **({"rung": rung} if rung else {}), **({"allow_losing": "true"} if allow_losing
                                                                            else {})}
        return self._request("GET", f"/v1/transfers/{transfer_id}/export", params=params).text

    def export_sweep(self, sweep_id: str, rung: str, format: Literal["yaml", "json"] = "yaml", *,
                     allow_losing: bool = False) -> str:
        """A SUCCEEDED sweep's choice carried to `rung` by the lr rules alone (nothing verified at that size)."""
        params = {"format": format, "rung": rung, **({"allow_losing": "true"} if allow_losing else {})}
        return self._request("GET", f"/v1/sweeps/{sweep_id}/export", params=params).text

    def report(self, transfer_id: str) -> str:
        """The transfer's self-contained HTML report."""
        return self._request("GET", f"/v1/transfers/{transfer_id}/report").text

    # --- polling -------------------------------------------------------------------------------------------------

    @staticmethod
    def _follow(get: Any, job_id: str, interval: float, timeout: float | None) -> Iterator[Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            snapshot = get(job_id)
            yield snapshot
            if snapshot.state in TERMINAL:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise ApiError("Timeout", None, f"{job_id} still {snapshot.state} after {timeout:g} s")
            time.sleep(interval)
