"""Policy studies (``gpufleet sweep``): a grid of replays and fills, each run a pure function
of its inputs, cached by a hash of them, executed on a local process pool or on Ray."""
