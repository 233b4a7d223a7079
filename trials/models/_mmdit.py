"""A double-stream MMDiT (SD3 / FLUX style) in one file: config, blocks, model.

Data flow for an image x (B, C, H, W), flow time t (B,), text tokens `context` (B, L, d_text) and a pooled
text vector `pooled` (B, d_pooled):

    image tokens  x   = Linear(patches of x) + fixed 2-D sin-cos positions          (B, N, D), N = (H/p)(W/p)
    text tokens   ctx = Linear(context)                                             (B, L, D)
    conditioning  c   = MLP(sinusoidal(1000 t)) + MLP(pooled)                       (B, D)
    blocks: each stream keeps its own weights (adaLN-Zero modulation from c, non-affine LayerNorm, qkv with
            QK-RMSNorm, output projection, GELU-tanh MLP); one attention over the concatenated [ctx, x]
    final layer: adaLN (shift, scale) + Linear back to patches -> velocity (B, C, H, W)

Parameter layout contract (the optimizer relies on it): the transformer blocks live in `model.blocks`, and
every 2-D parameter inside them is an `nn.Linear` weight (per stream: adaLN modulation, qkv, proj, fc1, fc2).
Inside the blocks the only other parameters are 1-D (biases, QK-RMSNorm gains). Everything else (patch
embedding, text projection, timestep and pooled MLPs, final layer) sits outside `model.blocks`; positions are
a buffer.

As in SD3, the text stream of the *last* block is "pre-only": its output would be thrown away, so it has no
output projection and no MLP. One step further than SD3, it has no queries either (its qkv Linear makes keys
and values only): text queries there would only feed the discarded text output. Every parameter gets a
gradient.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import Tensor, nn

from ..core.errors import InputError

__all__ = ["MMDiT", "MMDiTConfig", "ModelError"]


class ModelError(InputError):  # a ValueError, as before
    """Base error of `trials.models`: a bad config, an unknown rung name, or inputs of the wrong shape."""


class MMDiTConfig(BaseModel):
    """Size and shape of an MMDiT. Unknown keys are errors; the defaults: a CPU-sized model on 16x16 RGB."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    width: int = Field(
        default=64,
        gt=0,
        description="hidden size D of both streams (SD3: 64 * depth; CPU ladder: 32 * depth)",
    )
    depth: int = Field(default=2, gt=0, description="number of double-stream blocks")
    heads: int = Field(
        default=2, gt=0, description="attention heads; width / heads is the head dim (SD3: 64)"
    )
    patch: int = Field(default=2, gt=0, description="patch side in pixels or latent cells (SD3: 2)")
    in_channels: int = Field(
        default=3, gt=0, description="image channels: 3 for RGB pixels, 16 for SD3's VAE latents"
    )
    image_size: int = Field(
        default=16, gt=0, description="image side in pixels or latent cells; square images only"
    )
    context_dim: int = Field(
        default=384, gt=0, description="text token width (all-MiniLM-L6-v2: 384; T5-XXL: 4096)"
    )
    pooled_dim: int = Field(
        default=384, gt=0, description="pooled text vector width (MiniLM: 384; CLIP-L + CLIP-G: 2048)"
    )
    mlp_ratio: float = Field(default=4.0, gt=0, description="MLP hidden size / width (SD3, DiT: 4)")
    frequency_dim: int = Field(
        default=256, gt=0, description="sinusoidal timestep embedding size (DiT, SD3: 256)"
    )
    qkv_bias: bool = Field(default=True, description="bias in the qkv projections (SD3: True)")
    norm_eps: float = Field(
        default=1e-6, gt=0, description="epsilon of the LayerNorms and QK-RMSNorms (DiT, SD3: 1e-6)"
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> MMDiTConfig:
        if self.width % self.heads:
            raise ValueError(f"width ({self.width}) must be divisible by heads ({self.heads})")
        if self.width % 4:
            raise ValueError(f"width ({self.width}) must be divisible by 4 for the 2-D sin-cos positions")
        if self.image_size % self.patch:
            raise ValueError(f"image_size ({self.image_size}) must be divisible by patch ({self.patch})")
        if self.frequency_dim % 2:
            raise ValueError(f"frequency_dim ({self.frequency_dim}) must be even")
        return self

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def grid_size(self) -> int:
        """Patches per image side."""
        return self.image_size // self.patch

    @property
    def num_patches(self) -> int:
        return self.grid_size**2

    @property
    def patch_dim(self) -> int:
        """Values per patch: patch * patch * in_channels."""
        return self.patch * self.patch * self.in_channels


# ----------------------------------------------------------------------------------------------------------
# Embeddings


def timestep_embedding(t: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """Sinusoidal embedding of flow times t in [0, 1], scaled by 1000 as SD3 does: (B,) -> (B, dim)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = 1000.0 * t.float()[:, None] * freqs[None]  # (B, half)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)  # (B, dim)


def sincos_positions_2d(width: int, grid_size: int) -> Tensor:
    """Fixed 2-D sin-cos positions (DiT's, MAE's): half the channels encode the row, half the column.

    Returns (grid_size**2, width), rows in the patch order."""
    quarter = width // 4
    omega = 1.0 / 10_000.0 ** (torch.arange(quarter, dtype=torch.float64) / quarter)  # (D/4,)
    coords = torch.arange(grid_size, dtype=torch.float64)
    rows, cols = torch.meshgrid(coords, coords, indexing="ij")  # (G, G) each, row-major like the patch order

    def encode(pos: Tensor) -> Tensor:
        args = pos.reshape(-1, 1) * omega[None]  # (N, D/4)
        return torch.cat([torch.sin(args), torch.cos(args)], dim=1)  # (N, D/2)

    return torch.cat([encode(rows), encode(cols)], dim=1).float()  # (N, D)


class _MLP(nn.Module):
    """Linear -> SiLU -> Linear, the conditioning MLP of DiT's timestep and SD3's pooled-text embedders."""

    def __init__(self, in_dim: int, width: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_dim, width)
        self.fc2 = nn.Linear(width, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.silu(self.fc1(x)))


def _modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    """adaLN: x (B, T, D) with per-sample shift and scale (B, D)."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


# ----------------------------------------------------------------------------------------------------------
# Blocks


class StreamLayers(nn.Module):
    """One stream's (image or text) half of a double-stream block; every 2-D parameter is a Linear weight.

    `pre_only` (the last block's text stream): modulation, norm, keys and values only; no queries, no output
    projection, no MLP.
    """

    def __init__(self, cfg: MMDiTConfig, *, pre_only: bool = False) -> None:
        super().__init__()
        width, hidden = cfg.width, int(cfg.width * cfg.mlp_ratio)
        self.pre_only = pre_only
        self.heads = cfg.heads
        # shift/scale for attention; plus gate for attention and shift/scale/gate for the MLP unless pre-only
        self.adaLN_modulation = nn.Linear(width, (2 if pre_only else 6) * width)
        # non-affine: the per-sample adaLN shift/scale take the place of LayerNorm's own gain and bias
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False, eps=cfg.norm_eps)
        self.qkv = nn.Linear(width, (2 if pre_only else 3) * width, bias=cfg.qkv_bias)  # pre-only: k, v
        # QK-RMSNorm over each head's channels (SD3.5, FLUX): keeps attention logits bounded in training
        self.k_norm = nn.RMSNorm(cfg.head_dim, eps=cfg.norm_eps)
        if not pre_only:
            self.q_norm = nn.RMSNorm(cfg.head_dim, eps=cfg.norm_eps)
            self.proj = nn.Linear(width, width)
            self.norm2 = nn.LayerNorm(width, elementwise_affine=False, eps=cfg.norm_eps)
            self.fc1 = nn.Linear(width, hidden)
            self.fc2 = nn.Linear(hidden, width)

    def qkv_heads(self, x: Tensor, shift: Tensor, scale: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Modulated, normalised tokens -> q, k, v, each (B, heads, T, head_dim); q and k RMS-normalised.

        A pre-only stream has no queries: its q is empty, (B, heads, 0, head_dim)."""
        B, T, D = x.shape
        n = 2 if self.pre_only else 3
        qkv = self.qkv(_modulate(self.norm1(x), shift, scale))  # (B, T, n*D)
        parts = qkv.view(B, T, n, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)  # n x (B, nh, T, hs)
        if self.pre_only:
            k = self.k_norm(parts[0])
            return k[:, :, :0], k, parts[1]
        return self.q_norm(parts[0]), self.k_norm(parts[1]), parts[2]

    def mlp(self, x: Tensor) -> Tensor:
        # tanh-approximated GELU: DiT's and SD3's choice
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class JointBlock(nn.Module):
    """Double-stream MMDiT block: separate weights per stream, one attention over the joint token sequence."""

    def __init__(self, cfg: MMDiTConfig, *, text_pre_only: bool = False) -> None:
        super().__init__()
        self.image = StreamLayers(cfg)
        self.text = StreamLayers(cfg, pre_only=text_pre_only)

    def forward(self, x: Tensor, ctx: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, N, D) image tokens, ctx (B, L, D) text tokens, c (B, D) SiLU-activated conditioning."""
        B, N, D = x.shape
        L = ctx.shape[1]
        x_mod = self.image.adaLN_modulation(c).chunk(6, dim=1)  # 6 x (B, D): shift, scale, gate (attn, MLP)
        c_mod = self.text.adaLN_modulation(c).chunk(2 if self.text.pre_only else 6, dim=1)

        qx, kx, vx = self.image.qkv_heads(x, x_mod[0], x_mod[1])  # (B, nh, N, hs) each
        qc, kc, vc = self.text.qkv_heads(ctx, c_mod[0], c_mod[1])  # (B, nh, L, hs) each; qc empty if pre-only
        q = torch.cat([qc, qx], dim=2)  # (B, nh, Q, hs), Q = L + N, or N when pre-only
        k, v = torch.cat([kc, kx], dim=2), torch.cat([vc, vx], dim=2)  # (B, nh, L+N, hs): joint keys, values
        out = F.scaled_dot_product_attention(q, k, v)  # (B, nh, Q, hs)
        out = out.transpose(1, 2).reshape(B, q.shape[2], D)  # (B, Q, D)
        out_x = out[:, -N:]  # (B, N, D): image tokens come last

        x = x + x_mod[2].unsqueeze(1) * self.image.proj(out_x)
        x = x + x_mod[5].unsqueeze(1) * self.image.mlp(_modulate(self.image.norm2(x), x_mod[3], x_mod[4]))
        if self.text.pre_only:
            return x, ctx  # the text tokens are not read again
        out_c = out[:, :L]  # (B, L, D)
        ctx = ctx + c_mod[2].unsqueeze(1) * self.text.proj(out_c)
        ctx = ctx + c_mod[5].unsqueeze(1) * self.text.mlp(_modulate(self.text.norm2(ctx), c_mod[3], c_mod[4]))
        return x, ctx


class FinalLayer(nn.Module):
    """adaLN (shift, scale) then a Linear from tokens back to patch values. Zero-initialised (DiT)."""

    def __init__(self, cfg: MMDiTConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.width, elementwise_affine=False, eps=cfg.norm_eps)
        self.adaLN_modulation = nn.Linear(cfg.width, 2 * cfg.width)
        self.linear = nn.Linear(cfg.width, cfg.patch_dim)

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)  # (B, D) each
        return self.linear(_modulate(self.norm(x), shift, scale))  # (B, N, p*p*C)


# ----------------------------------------------------------------------------------------------------------
# Model


class MMDiT(nn.Module):
    """Text-to-image double-stream MMDiT predicting the flow velocity: `model(x, t, context, pooled)`."""

    def __init__(self, config: MMDiTConfig) -> None:
        super().__init__()
        self.config = cfg = config
        self.x_embedder = nn.Linear(
            cfg.patch_dim, cfg.width
        )  # a Linear on flattened patches == a strided conv
        self.register_buffer("pos_embed", sincos_positions_2d(cfg.width, cfg.grid_size), persistent=False)
        self.context_embedder = nn.Linear(cfg.context_dim, cfg.width)
        self.t_embedder = _MLP(cfg.frequency_dim, cfg.width)
        self.y_embedder = _MLP(cfg.pooled_dim, cfg.width)
        self.blocks = nn.ModuleList(
            JointBlock(cfg, text_pre_only=(i == cfg.depth - 1)) for i in range(cfg.depth)
        )
        self.final_layer = FinalLayer(cfg)
        self.initialize_weights()

    def initialize_weights(self) -> None:
        """DiT's init: Xavier-uniform Linears with zero bias, N(0, 0.02) conditioning MLPs, adaLN-Zero
        modulation and a zero final layer: the untrained model outputs exactly zero and every block starts as
        the identity."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for mlp in (self.t_embedder, self.y_embedder):
            nn.init.normal_(mlp.fc1.weight, std=0.02)
            nn.init.normal_(mlp.fc2.weight, std=0.02)
        for block in cast(list[JointBlock], self.blocks):
            for stream in (block.image, block.text):
                nn.init.zeros_(stream.adaLN_modulation.weight)
                nn.init.zeros_(stream.adaLN_modulation.bias)
        for layer in (self.final_layer.adaLN_modulation, self.final_layer.linear):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def patchify(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, N, p*p*C), patches in row-major order, channels last within a patch."""
        B, C, H, W = x.shape
        p = self.config.patch
        x = x.reshape(B, C, H // p, p, W // p, p)  # (B, C, h, p, w, p)
        return x.permute(0, 2, 4, 3, 5, 1).reshape(B, (H // p) * (W // p), p * p * C)  # (B, h*w, p*p*C)

    def unpatchify(self, x: Tensor) -> Tensor:
        """(B, N, p*p*C) -> (B, C, H, W), the inverse of `patchify`."""
        cfg = self.config
        B, g, p, C = x.shape[0], cfg.grid_size, cfg.patch, cfg.in_channels
        x = x.reshape(B, g, g, p, p, C)  # (B, h, w, p, p, C)
        return x.permute(0, 5, 1, 3, 2, 4).reshape(B, C, g * p, g * p)  # (B, C, H, W)

    def _check_inputs(self, x: Tensor, t: Tensor, context: Tensor, pooled: Tensor) -> None:
        cfg = self.config
        if x.ndim != 4 or x.shape[1:] != (cfg.in_channels, cfg.image_size, cfg.image_size):
            raise ModelError(
                f"x must be (B, {cfg.in_channels}, {cfg.image_size}, {cfg.image_size}), got {tuple(x.shape)}"
            )
        B = x.shape[0]
        if t.shape != (B,):
            raise ModelError(f"t must be ({B},), got {tuple(t.shape)}")
        if context.ndim != 3 or context.shape[0] != B or context.shape[2] != cfg.context_dim:
            raise ModelError(f"context must be ({B}, L, {cfg.context_dim}), got {tuple(context.shape)}")
        if pooled.shape != (B, cfg.pooled_dim):
            raise ModelError(f"pooled must be ({B}, {cfg.pooled_dim}), got {tuple(pooled.shape)}")

    def forward(self, x: Tensor, t: Tensor, context: Tensor, pooled: Tensor) -> Tensor:
        """x (B, C, H, W), t (B,) in [0, 1], context (B, L, d_text), pooled (B, d_pooled) -> (B, C, H, W)."""
        self._check_inputs(x, t, context, pooled)
        x = self.x_embedder(self.patchify(x)) + self.pos_embed  # (B, N, D)
        ctx = self.context_embedder(context)  # (B, L, D)
        c = self.t_embedder(timestep_embedding(t, self.config.frequency_dim).to(x.dtype)) + self.y_embedder(
            pooled
        )
        c = F.silu(c)  # (B, D); every adaLN modulation reads SiLU(c), so apply it once here
        for block in self.blocks:
            x, ctx = block(x, ctx, c)
        return self.unpatchify(self.final_layer(x, c))  # (B, C, H, W)
