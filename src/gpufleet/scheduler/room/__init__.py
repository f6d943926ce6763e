"""Making room for a job that does not fit: the victim search, the actions that say who may
be a victim (consolidate, reclaim, preempt, preemption under a limit) and their memo of
failures."""
