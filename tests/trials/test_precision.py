"""`precision: fp32 | bf16`: bf16 autocast in the training step where the device has native bf16, refused elsewhere,
and the run records which precision ran."""

from __future__ import annotations

import pytest
import torch
from mlflow import MlflowClient
from pydantic import ValidationError

from trials import TrialConfig, TrialError, run_trial
from trials._run import native_bf16

from ..conftest import tiny_trial

NATIVE = native_bf16(torch.device("cpu"))


@pytest.mark.skipif(not NATIVE, reason="this CPU has no AMX or AVX512-BF16")
def test_bf16_trains_in_bf16_keeps_fp32_weights_and_records_it(store_uri: str) -> None:
    tracking = {"tracking_uri": store_uri, "experiment": "precision"}
    fp32 = run_trial(tiny_trial(tracking=tracking))
    bf16 = run_trial(tiny_trial(tracking=tracking, precision="bf16"))
    assert bf16.status == fp32.status == "SUCCEEDED"
    # Same seed, same batches: the two runs start alike and drift apart by bf16 rounding, not by a bug.
    assert bf16.fd != fp32.fd
    for step in (12, 24):
        assert bf16.val_loss[step] == pytest.approx(fp32.val_loss[step], rel=0.05)
    client = MlflowClient(store_uri)
    assert client.get_run(bf16.run_id).data.params["precision"] == "bf16"
    assert client.get_run(fp32.run_id).data.params["precision"] == "fp32"


@pytest.mark.skipif(not NATIVE, reason="this CPU has no AMX or AVX512-BF16")
def test_autocast_runs_the_forward_in_bf16_and_leaves_master_weights_fp32() -> None:
    from trials._run import autocast

    cfg = TrialConfig.model_validate(tiny_trial(precision="bf16"))
    layer = torch.nn.Linear(8, 8)
    with autocast(cfg, torch.device("cpu")):
        out = layer(torch.randn(4, 8))
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16
    assert layer.weight.dtype == layer.weight.grad.dtype == torch.float32


def test_bf16_is_refused_where_the_cpu_has_no_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    # The refusal path of a CPU without AMX/AVX512-BF16, on any machine: oneDNN's own answer is what decides.
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    with pytest.raises(TrialError, match=r"precision 'bf16' needs native bf16 .*allowed here: precision 'fp32'"):
        run_trial(tiny_trial(precision="bf16"))


def test_precision_and_a_batch_that_does_not_split_are_refused_by_the_config() -> None:
    with pytest.raises(ValidationError, match="'fp32' or 'bf16'"):
        TrialConfig.model_validate(tiny_trial(precision="fp16"))
    with pytest.raises(ValidationError, match=r"batch_size 16 .* does not split evenly across workers=3"):
        TrialConfig.model_validate(tiny_trial(batch_size=16, workers=3))
    assert TrialConfig.model_validate(tiny_trial(batch_size=16, workers=4)).workers == 4
