"""Where a job goes: the placer (a job's core all or nothing), one pod's placement, slot
counts and topology domains."""
