"""Simulation: the fill protocol of the FGD paper (and later, time-driven replay)."""
