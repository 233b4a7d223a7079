"""Which parameters get a Muon-family optimizer and which get AdamW.

The rule (the paper's, and Muon's usual one): the 2-D weight matrices *inside the transformer blocks* go to Muon,
about 99% of an MMDiT's parameters at paper scale. Everything else goes to AdamW: biases, norm gains, embeddings,
the patch and text input projections, the timestep and pooled-text MLPs, and the final layer.

The adaLN modulation matrices: each block's modulation `Linear` (conditioning vector -> shift/scale/gate) is a 2-D
weight inside a block, so it goes to **Muon**; it is 12*d*d per double-stream block, too large a share to leave
out. The final layer's adaLN modulation sits outside the blocks and goes to **AdamW**, with the rest of the
output head. Embedding tables are never Muon matrices, even inside a block: rows are looked up, not mixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from torch import Tensor, nn

__all__ = ["ParameterRouting", "route_parameters"]


@dataclass(frozen=True)
class ParameterRouting:
    """The split of a model's trainable parameters into the Muon group and the AdamW (aux) group."""

    muon: list[tuple[str, Tensor]] = field(default_factory=list)
    aux: list[tuple[str, Tensor]] = field(default_factory=list)

    @property
    def muon_numel(self) -> int:
        return sum(p.numel() for _, p in self.muon)

    @property
    def aux_numel(self) -> int:
        return sum(p.numel() for _, p in self.aux)

    @property
    def muon_fraction(self) -> float:
        """Share of trainable parameters in the Muon group (the paper: about 0.99 at 1.3B and above)."""
        total = self.muon_numel + self.aux_numel
        return self.muon_numel / total if total else 0.0


def _inside(name: str, prefixes: Sequence[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def route_parameters(model: nn.Module, block_prefixes: Sequence[str] = ("blocks",)) -> ParameterRouting:
    """Split `model`'s trainable parameters: 2-D weights under `block_prefixes` to Muon, the rest to AdamW.

    `block_prefixes` are module paths of the transformer block containers (`"blocks"` for scalesweep's MMDiT;
    e.g. `("transformer_blocks", "single_transformer_blocks")` for a diffusers FLUX model).
    """
    prefixes = tuple(block_prefixes)
    module_names = {name for name, _ in model.named_modules()}
    missing = [p for p in prefixes if p not in module_names]
    if missing:
        raise ValueError(
            f"block_prefixes {missing} name no submodule of {type(model).__name__}; "
            f"top-level modules are {sorted(n for n in module_names if n and '.' not in n)}"
        )
    routing = ParameterRouting()
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for param_name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:  # tied weights are routed once
                continue
            seen.add(id(p))
            full = f"{module_name}.{param_name}" if module_name else param_name
            is_matrix = p.ndim == 2 and not isinstance(module, nn.Embedding)
            if is_matrix and _inside(module_name, prefixes):
                routing.muon.append((full, p))
            else:
                routing.aux.append((full, p))
    if not routing.muon:
        raise ValueError(f"no 2-D weight found under {list(prefixes)}: nothing for Muon to optimise")
    return routing
