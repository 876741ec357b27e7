"""The node group reconciler: one pass makes node groups a step closer to their spec.

`reconcile.py` is the pass (the phase list and the only writer); each other
module is one phase or one concern: `state` (the working state of a pass),
`spec` (what the driver is asked to make), `observe`, `scale`, `act`, `status`
and `delete`.
"""
