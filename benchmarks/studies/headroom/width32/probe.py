import sys, time, dataclasses
sys.path.insert(0, "benchmarks")
import torch
from headroom import trial_config
from trials import run_trial
from trials.models import _ladder as L
torch.set_num_threads(1)
def add(name, width, depth, heads):
    base = L.RUNGS["cpu-2xs"]
    cfg = base.config.model_copy(update={"width": width, "depth": depth, "heads": heads})
    L.RUNGS[name] = L.Rung(name, cfg, "none")
add("p-w64d2h2", 64, 2, 2)
for rung, opt in [(r, o) for r, o in (x.split(":") for x in sys.argv[1].split(","))]:
    steps = int(sys.argv[2]); cfg = trial_config(rung if not rung.startswith("p-") else "cpu-2xs", 0, steps, 1, False)
    cfg["rung"] = rung
    cfg["optimizer"] = {"name": opt}
    cfg["eval"] = {"extractor": "scenes-cnn", "fd_samples": 256, "track_points": 0, "fd_bias": False}
    cfg["eval_steps"] = list(range(steps // 6, steps + 1, steps // 6))
    t = time.time()
    try:
        r = run_trial(cfg)
        print(rung, opt, {k: round(v, 4) for k, v in r.val_loss.items()}, {k: round(v) for k, v in r.fd.items()}, r.alignment.get(steps, {}).get("alignment"), f"{time.time()-t:.0f}s", flush=True)
    except Exception as e:
        print(rung, opt, "ERR", e, flush=True)
