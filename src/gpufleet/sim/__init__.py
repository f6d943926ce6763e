"""Simulation: the fill protocol of the FGD paper, and the time-driven replay of a trace."""
