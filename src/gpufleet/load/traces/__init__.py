"""Traces a replay runs on (openb, Philly) and the inputs gathered for it."""
