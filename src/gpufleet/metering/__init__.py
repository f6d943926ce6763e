"""Metering: what the GPUs did and what jobs lived through, and each pod's runs on nodes,
from facts (a pod waits, starts, stops) — pure, so that the replay, the cost layer and the
live scheduler measure the same way."""
