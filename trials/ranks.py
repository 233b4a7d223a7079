"""What the ranks of a multi-worker trial tell each other and a stall watchdog, through the trial's TCP store at rank
0 (`trials._distributed`): that a rank joined (`JOINED_KEY`), its beat each second (`start_heartbeat`, `read_beat`:
its step and the collective it waits in, from `BEACON`), and rank 0's evaluations the others wait for on the store
(`watch_evaluations`). The sweeper's N-worker trials meet and are watched through these (`sweeper.search`)."""

from __future__ import annotations

from ._distributed import BEACON, JOINED_KEY, Beacon, read_beat, start_heartbeat, trial_store, watch_evaluations

__all__ = ["BEACON", "JOINED_KEY", "Beacon", "read_beat", "start_heartbeat", "trial_store", "watch_evaluations"]
