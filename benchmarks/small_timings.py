"""Small timings the docs quote, each reproducible on your machine in under a minute.

    python benchmarks/small_timings.py            # both
    python benchmarks/small_timings.py --only ns5  # Newton-Schulz in bf16 and fp32 on a 1536x512 matrix
    python benchmarks/small_timings.py --only minilm

- ns5: `newton_schulz5` on a 1536x512 matrix (an MLP matrix of a width-512 block), one thread, in bf16 and in
  fp32: why `ns_dtype="auto"` picks fp32 on CPUs without native bf16 matmul (docs/guide.md, "The optimizer").
- minilm: the frozen MiniLM encoder on every caption of the shapes set (540), one caption at a time as trials do
  (docs/guide.md, "A trial"): the once-per-process cost of the default text encoder.

Prints the CPU model and whether torch sees native bf16 matmul, since the ns5 ratio depends on it
(docs/design.md, "Machines and versions").
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def time_ns5(repeats: int) -> dict[str, float]:
    from trials.optim.functional import newton_schulz5

    torch.set_num_threads(1)
    g = torch.randn(1536, 512, generator=torch.Generator().manual_seed(0))
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        newton_schulz5(g, dtype=dtype)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            newton_schulz5(g, dtype=dtype)
            times.append(time.perf_counter() - start)
        out[str(dtype).removeprefix("torch.")] = statistics.median(times)
    return out


def time_minilm() -> float:
    from trials.data import get_dataset
    from trials.text import get_text_encoder

    captions = get_dataset("shapes", image_size=16, seed=0).captions()
    start = time.perf_counter()
    encoder = get_text_encoder("minilm")
    encoder.encode(captions)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["ns5", "minilm"])
    parser.add_argument("--repeats", type=int, default=3, help="timed NS5 calls per dtype (median reported)")
    args = parser.parse_args()
    print(f"cpu: {cpu_model()}; native bf16 matmul: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}; "
          f"torch {torch.__version__}")
    if args.only in (None, "ns5"):
        t = time_ns5(args.repeats)
        print(f"ns5 1536x512, 1 thread, median of {args.repeats}: float32 {t['float32']:.3f} s, "
              f"bfloat16 {t['bfloat16']:.3f} s, ratio bf16/fp32 {t['bfloat16'] / t['float32']:.1f}")
    if args.only in (None, "minilm"):
        from trials.data import get_dataset

        n = len(get_dataset("shapes", image_size=16, seed=0).captions())
        print(f"minilm: load and encode {n} captions one at a time: {time_minilm():.1f} s")


if __name__ == "__main__":
    main()
