"""Update RMS and spectral norm per matrix kind and step kind: the pure pieces on chosen matrices, then a real
optimizer step of each arm on the tiny MMDiT."""

from __future__ import annotations

import math

import pytest
import torch

from trials.models import build_model
from trials.optim import build_optimizer, matrix_kind, update_stats
from trials.optim._update_stats import MATRIX_KINDS, spectral_norm
from trials.optim.functional import newton_schulz5, unit_rows_or_columns

from ..conftest import tiny_trial


def _with_spectrum(m: int, n: int, values: list[float], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q1, _ = torch.linalg.qr(torch.randn(m, len(values), generator=g))
    q2, _ = torch.linalg.qr(torch.randn(n, len(values), generator=g))
    return q1 @ torch.diag(torch.tensor(values)) @ q2.T


def test_matrix_kinds_of_scalesweep_and_diffusers_names() -> None:
    assert matrix_kind("blocks.0.image.qkv.weight") == "qkv"
    assert matrix_kind("blocks.3.text.proj.weight") == "attn_out"
    assert matrix_kind("blocks.0.image.fc1.weight") == "mlp_in" and matrix_kind("blocks.0.text.fc2.weight") == "mlp_out"
    assert matrix_kind("blocks.1.image.adaLN_modulation.weight") == "modulation"
    assert matrix_kind("transformer_blocks.0.attn.to_k.weight") == "qkv"
    assert matrix_kind("transformer_blocks.0.ff.net.0.proj.weight") == "mlp_in"  # not attn_out despite 'proj'
    assert matrix_kind("transformer_blocks.0.attn.to_out.0.weight") == "attn_out"
    assert matrix_kind("transformer_blocks.0.norm1.linear.weight") == "modulation"
    assert matrix_kind("blocks.0.image.norm.weight") is None


def test_spectral_norm_by_power_iteration_matches_the_svd() -> None:
    a = _with_spectrum(48, 96, [3.0, 1.0, 0.5, 0.2])
    assert spectral_norm(a) == pytest.approx(3.0, rel=1e-4)
    assert float(torch.linalg.matrix_norm(a, ord=2)) == pytest.approx(3.0, rel=1e-5)
    assert spectral_norm(torch.zeros(4, 6)) == 0.0
    with pytest.raises(ValueError, match="2-D"):
        spectral_norm(torch.ones(3))


def test_row_norm_matches_the_polar_rms_but_not_its_spectral_norm_and_the_gap_grows_with_width() -> None:
    # Low-rank-plus-noise momentum, d x 4d: the row-normalised update has the polar factor's RMS, 1/sqrt(4d), but
    # a spectral norm far above the polar factor's 1, and growing with d.
    specs = []
    for d in (32, 64, 128):
        g = torch.Generator().manual_seed(d)
        low_rank = torch.randn(d, 2, generator=g) @ torch.randn(2, 4 * d, generator=g)
        u = low_rank + 0.1 * torch.randn(d, 4 * d, generator=g)
        rows = unit_rows_or_columns(u)
        polar = newton_schulz5(u, dtype=torch.float32).float()
        assert float(rows.pow(2).mean().sqrt()) == pytest.approx(1 / math.sqrt(4 * d), rel=1e-4)
        assert 0.6 < spectral_norm(polar) < 1.3
        specs.append(spectral_norm(rows))
    assert specs[0] > 2.0 and specs[0] < specs[1] < specs[2]


def _stepped(name: str, **cfg: object) -> object:
    torch.manual_seed(0)
    model = build_model("cpu-xs", context_dim=16, pooled_dim=16)
    opt = build_optimizer(model, {"name": name, "ns_dtype": "float32", **cfg})
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 0.01
    opt.step()
    return opt


def test_periodic_logs_both_step_kinds_for_every_matrix_kind_with_the_optimizer_scale() -> None:
    lr, gamma = 0.02, 0.15
    stats = update_stats(_stepped("periodic", lr=lr, gamma=gamma, refresh_every=3))
    assert set(stats) == {f"update_{m}.{k}.{s}" for m in ("rms", "spec") for k in MATRIX_KINDS
                          for s in ("refresh", "rownorm")}
    # Row norm: unit columns of the tall 384x64 modulation matrix, so RMS = gamma * eta / sqrt(384), where
    # eta = lr * sqrt(384 / 64) (the 'original' shape adjustment).
    eta = lr * math.sqrt(384 / 64)
    assert stats["update_rms.modulation.rownorm"] == pytest.approx(gamma * eta / math.sqrt(384), rel=1e-4)
    # Refresh: the polar factor's RMS is about 1/sqrt(max(m, n)) too (NS5 maps singular values into ~[0.7, 1.2]).
    assert 0.6 < stats["update_rms.modulation.refresh"] / (eta / math.sqrt(384)) < 1.3
    assert 0.6 < stats["update_spec.qkv.refresh"] / (lr * math.sqrt(3)) < 1.3
    assert stats["update_spec.mlp_in.rownorm"] > 0 and all(math.isfinite(v) for v in stats.values())


def test_each_arm_logs_the_step_kinds_it_uses() -> None:
    muon = update_stats(_stepped("muon"))
    assert muon and all(k.endswith(".refresh") for k in muon)
    rownorm = update_stats(_stepped("rownorm"))
    assert rownorm and all(k.endswith(".rownorm") for k in rownorm)
    assert update_stats(_stepped("adamw")) == {}
    torch.manual_seed(0)
    fresh = build_optimizer(build_model("cpu-xs", context_dim=16, pooled_dim=16), {"name": "periodic"})
    assert update_stats(fresh) == {}  # before the first step there is no update to measure


def test_torch_muon_in_bf16_is_measured_too() -> None:
    stats = update_stats(_stepped("muon", ns_dtype="bfloat16"))  # torch.optim.Muon itself
    assert set(stats) == {f"update_{m}.{k}.refresh" for m in ("rms", "spec") for k in MATRIX_KINDS}


def test_a_trial_logs_the_update_statistics_at_its_eval_steps() -> None:
    from trials import run_trial

    tiny = tiny_trial(steps=6, eval_steps=[3, 6], warmup_steps=2, log_every=2,
                      optimizer={"name": "periodic", "refresh_every": 2})
    records: list[dict] = []
    run_trial(tiny, progress=records.append)
    assert [r["step"] for r in records] == [3, 6]
    for r in records:
        assert r["update_rms.qkv.rownorm"] > 0 and r["update_spec.mlp_out.refresh"] > 0
