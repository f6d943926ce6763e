"""One module per policy or feature; :mod:`gpufleet.plugins.registry` registers them all."""
