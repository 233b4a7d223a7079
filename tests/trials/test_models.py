from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from trials.models import (
    MMDiT,
    MMDiTConfig,
    ModelError,
    build_model,
    count_parameters,
    get_rung,
    list_rungs,
)

CPU_RUNGS = ["cpu-xs", "cpu-s", "cpu-m", "cpu-l"]  # the rungs that mirror the paper's four
SMALL_RUNGS = ["cpu-3xs", "cpu-2xs", "cpu-xs1"]  # below the paper's mirrors
PAPER_RUNGS = ["paper-1.3b", "paper-4b", "paper-9b", "paper-15b"]


def _inputs(cfg: MMDiTConfig, batch: int = 3, length: int = 5, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, cfg.in_channels, cfg.image_size, cfg.image_size, generator=g)
    t = torch.rand(batch, generator=g)
    context = torch.randn(batch, length, cfg.context_dim, generator=g)
    pooled = torch.randn(batch, cfg.pooled_dim, generator=g)
    return x, t, context, pooled


def _randomise_zeroed(model: nn.Module, seed: int = 0) -> None:
    """Give the zero-initialised layers (adaLN modulation, final layer) small random values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2 and not p.any():
                p.normal_(0.0, 0.02, generator=g)


def test_registry_lists_rungs_in_size_order() -> None:
    assert list_rungs() == SMALL_RUNGS + CPU_RUNGS + PAPER_RUNGS
    assert list_rungs("cpu") == SMALL_RUNGS + CPU_RUNGS
    assert list_rungs("paper") == PAPER_RUNGS


def test_unknown_rung_lists_the_valid_names() -> None:
    with pytest.raises(ModelError, match="valid rungs") as info:
        get_rung("cpu-xxl")
    for name in SMALL_RUNGS + CPU_RUNGS + PAPER_RUNGS:
        assert name in str(info.value)


def test_rung_shapes_follow_the_width_rules() -> None:
    for name, depth in zip(CPU_RUNGS, [2, 3, 4, 5], strict=True):
        cfg = get_rung(name).config
        assert (cfg.depth, cfg.width, cfg.head_dim) == (depth, 32 * depth, 32)
        assert (cfg.in_channels, cfg.image_size, cfg.patch) == (3, 16, 2)
    for name, depth in zip(PAPER_RUNGS, [21, 30, 40, 47], strict=True):
        cfg = get_rung(name).config
        assert (cfg.depth, cfg.width, cfg.head_dim) == (depth, 64 * depth, 64)
        assert (cfg.in_channels, cfg.context_dim, cfg.pooled_dim) == (16, 4096, 2048)


def _linear(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _formula(cfg: MMDiTConfig) -> tuple[int, int]:
    """(total, 2-D weights inside the blocks) of the double-stream MMDiT, counted from its definition.

    Per block and stream: adaLN modulation D -> 6D, qkv D -> 3D, attention out D -> D, MLP D -> rD -> D (r the
    MLP ratio), QK-RMSNorm gains of one head each (q and k). The last block's text stream stops after its keys and
    values: modulation D -> 2D, kv D -> 2D, the k gain. Outside the blocks: patch embedding p*p*C -> D, text
    projection -> D, timestep MLP (frequency -> D -> D), pooled-text MLP (pooled -> D -> D), final layer (adaLN
    D -> 2D, D -> p*p*C). LayerNorms are non-affine (no parameters); positions are a fixed buffer."""
    d, hidden, hd, patch_dim = cfg.width, int(cfg.width * cfg.mlp_ratio), cfg.width // cfg.heads, cfg.patch_dim
    qkv_bias = cfg.qkv_bias
    full_matrices = d * 6 * d + d * 3 * d + d * d + d * hidden + hidden * d
    full = (_linear(d, 6 * d) + _linear(d, 3 * d, qkv_bias) + 2 * hd + _linear(d, d) + _linear(d, hidden)
            + _linear(hidden, d))
    pre_matrices = d * 2 * d + d * 2 * d
    pre = _linear(d, 2 * d) + _linear(d, 2 * d, qkv_bias) + hd
    blocks = (2 * cfg.depth - 1) * full + pre
    block_matrices = (2 * cfg.depth - 1) * full_matrices + pre_matrices
    outside = (_linear(patch_dim, d) + _linear(cfg.context_dim, d)
               + _linear(cfg.frequency_dim, d) + _linear(d, d)
               + _linear(cfg.pooled_dim, d) + _linear(d, d)
               + _linear(d, 2 * d) + _linear(d, patch_dim))
    return blocks + outside, block_matrices


@pytest.mark.parametrize("name", SMALL_RUNGS + CPU_RUNGS + PAPER_RUNGS)
def test_cpu_parameter_counts_and_block_share(name: str) -> None:
    """The parameter counts are the N of every scaling fit: each equals the architecture's formula exactly."""
    cfg = get_rung(name).config
    total, block_matrix = _formula(cfg)
    count = count_parameters(build_model(name, device="meta"))
    assert (count.total, count.block_matrix) == (total, block_matrix)
    if name == "cpu-xs":  # the formula by hand at D=64, depth 2, 2 heads, 12 patch values, 384-d MiniLM inputs
        assert total == 3 * 74_752 + 16_672 + 832 + 24_640 + 20_608 + 28_800 + 9_100 == 324_908
    if name in CPU_RUNGS:
        # at width 64 the MiniLM input projections and conditioning MLPs are a quarter of the model
        assert count.block_matrix_share >= (0.73 if name == "cpu-xs" else 0.85)


def test_paper_parameter_counts_on_meta_device() -> None:
    targets = {"paper-1.3b": 1.36e9, "paper-4b": 4.0e9, "paper-9b": 9.5e9, "paper-15b": 15.4e9}
    for name, target in targets.items():
        model = build_model(name, device="meta")
        assert next(model.parameters()).device.type == "meta"
        count = count_parameters(model)
        assert count.total == pytest.approx(target, rel=0.15)  # the paper's rounded sizes; exact counts above
        assert count.block_matrix_share > 0.985


def test_the_cpu_ladder_spans_more_than_a_decade_and_a_half_at_the_scenes_size() -> None:
    # The headroom ladder (issue 62): at least 5 rungs over at least 1.5 decades of Muon-group parameters, at the
    # scenes set's 32 x 32 with patch 4; the small rungs keep the family's head dim of 32.
    blocks = [count_parameters(build_model(n, image_size=32, patch=4)).block_matrix for n in list_rungs("cpu")]
    assert blocks == sorted(blocks) and len(blocks) >= 5
    assert blocks == [22_528, 59_392, 90_112, 237_568, 866_304, 2_129_920, 4_249_600]
    # the scenes ladder, cpu-xs1 .. cpu-l: 5 rungs over 1.67 decades, every one at least as wide as a patch's 48 values
    assert math.log10(blocks[-1] / blocks[2]) >= 1.5 and len(blocks[2:]) == 5
    for name, (width, depth) in zip(SMALL_RUNGS, [(32, 1), (32, 2), (64, 1)], strict=True):
        cfg = get_rung(name).config
        assert (cfg.width, cfg.depth, cfg.head_dim, cfg.patch) == (width, depth, 32, 2)


def test_cpu_ladder_mirrors_paper_ratios() -> None:
    cpu = [count_parameters(build_model(n, device="meta")).total for n in CPU_RUNGS]
    paper = [count_parameters(build_model(n, device="meta")).total for n in PAPER_RUNGS]
    for c, p in zip(cpu[1:], paper[1:], strict=True):
        assert c / cpu[0] == pytest.approx(p / paper[0], rel=0.25)


def test_block_contract_for_the_optimizer() -> None:
    model = build_model("cpu-xs")
    assert isinstance(model.blocks, nn.ModuleList) and len(model.blocks) == 2
    linear_weights = {id(m.weight) for m in model.blocks.modules() if isinstance(m, nn.Linear)}
    block_params = list(model.blocks.parameters())
    matrices = [p for p in block_params if p.ndim == 2]
    assert {id(p) for p in matrices} == linear_weights  # every 2-D block parameter is a Linear weight
    assert all(p.ndim == 1 for p in block_params if p.ndim != 2)
    # per stream: modulation, qkv, proj, fc1, fc2; the last block's text stream is pre-only (modulation, qkv)
    assert len(matrices) == 5 + 5 + 5 + 2
    outside = {id(p) for p in model.parameters()} - {id(p) for p in block_params}
    top_level = {name.split(".")[0] for name, p in model.named_parameters() if id(p) in outside}
    assert top_level == {"x_embedder", "context_embedder", "t_embedder", "y_embedder", "final_layer"}
    assert "pos_embed" not in dict(model.named_parameters())  # fixed positions are a buffer


def test_zero_init_gives_exactly_zero_output() -> None:
    torch.manual_seed(0)
    model = build_model("cpu-xs")
    out = model(*_inputs(model.config))
    assert out.shape == (3, 3, 16, 16)
    assert torch.equal(out, torch.zeros_like(out))
    for block in model.blocks:
        for stream in (block.image, block.text):
            assert not stream.adaLN_modulation.weight.any() and not stream.adaLN_modulation.bias.any()


def test_every_parameter_gets_a_gradient() -> None:
    torch.manual_seed(0)
    model = build_model("cpu-xs")
    _randomise_zeroed(model)
    model(*_inputs(model.config)).square().mean().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []  # no dead weights: the last block's text stream has no unused MLP


def test_output_depends_on_every_input() -> None:
    torch.manual_seed(0)
    model = build_model("cpu-xs", image_size=8)
    _randomise_zeroed(model)
    x, t, context, pooled = _inputs(model.config)
    base = model(x, t, context, pooled)
    for changed in (
        (x + 0.5, t, context, pooled),
        (x, t * 0.5, context, pooled),
        (x, t, context + 0.5, pooled),
        (x, t, context, pooled + 0.5),
    ):
        assert (model(*changed) - base).abs().max() > 1e-6


def test_shapes_for_other_sizes_and_context_lengths() -> None:
    model = build_model("cpu-xs", image_size=8, in_channels=4, patch=4, context_dim=12, pooled_dim=7)
    for length in (1, 9):
        out = model(*_inputs(model.config, batch=2, length=length))
        assert out.shape == (2, 4, 8, 8)


def test_patchify_round_trip() -> None:
    model = build_model("cpu-xs", in_channels=4)
    x = torch.randn(2, 4, 16, 16)
    patches = model.patchify(x)
    assert patches.shape == (2, 64, 16)
    assert torch.equal(
        patches[0, 0], x[0, :, :2, :2].permute(1, 2, 0).reshape(-1)
    )  # channels last in a patch
    assert torch.equal(model.unpatchify(patches), x)


def test_bad_inputs_raise_model_error() -> None:
    model = build_model("cpu-xs")
    x, t, context, pooled = _inputs(model.config)
    with pytest.raises(ModelError, match="x must be"):
        model(x[:, :, :8, :8], t, context, pooled)
    with pytest.raises(ModelError, match="context must be"):
        model(x, t, context[..., :10], pooled)
    with pytest.raises(ModelError, match="pooled must be"):
        model(x, t, context, pooled[:2])
    with pytest.raises(ModelError, match="t must be"):
        model(x, t[:2], context, pooled)


def test_overrides_and_config_validation() -> None:
    model = build_model("cpu-xs", depth=3)
    assert isinstance(model, MMDiT) and len(model.blocks) == 3 and model.config.width == 64
    assert get_rung("cpu-xs").config.depth == 2  # the registry entry is untouched
    with pytest.raises(ValueError, match="extra"):
        build_model("cpu-xs", widht=64)
    with pytest.raises(ValueError, match="divisible by heads"):
        MMDiTConfig(width=64, heads=3)
    with pytest.raises(ValueError, match="divisible by patch"):
        MMDiTConfig(image_size=15)


def test_scalesweep_rungs_lists_every_rung(capsys: pytest.CaptureFixture[str]) -> None:
    import scalesweep_cli

    assert scalesweep_cli.main(["rungs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == list_rungs()
    row = next(line.split() for line in lines if line.startswith("cpu-2xs"))
    assert row[1:6] == ["32", "2", "1", "99,084", "59,392"]
