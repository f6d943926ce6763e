"""Pure value types and the vectorised cluster state; no I/O, no clock, no randomness."""
