"""The rank side, used by every measuring command: the ops (one contract, one file per op),
the timers, the side group, skew, the plan and the per-size loop (:mod:`.loop`). It knows
no command."""
