"""One size basis per study: a rung's parameter count is the count of the denoiser the study's
trials build, the number every run logs, wherever a size appears (sweep export, transfer plan, fits, predict)."""

from __future__ import annotations

from sweeper.transfer import size_basis
from sweeper.transfer._plan import _rung_shape
from trials import run_trial

from ...conftest import tiny_trial

LEARNED = {"text_encoder": "learned"}


def test_the_basis_is_what_a_real_trial_counts() -> None:
    trial = tiny_trial(**LEARNED, steps=2, eval_steps=[2], batch_size=4, warmup_steps=0, log_every=1,
                       eval={"fd_samples": 16, "reference_samples": 32, "sample_steps": 1, "val_samples": 4})
    result = run_trial(trial)
    assert result.parameters == _rung_shape("cpu-xs", LEARNED)[1]


def test_the_two_encoders_give_two_counts_and_each_is_stated() -> None:
    # The numbers: cpu-s counted with the learned encoder (what the transfer's runs logged) and with the
    # MiniLM widths (what the sweep export used).
    assert _rung_shape("cpu-s", LEARNED)[1] == 951_052
    assert _rung_shape("cpu-s", {"text_encoder": "minilm"})[1] == _rung_shape("cpu-s")[1] == 1_012_492
    text = size_basis(LEARNED)[1]
    assert "learned text encoder: context 64" in text and "16px" in text
    assert "minilm text encoder: context 384" in size_basis({})[1]
