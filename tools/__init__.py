"""Tools for working on gpufleet: generators of committed files (the CRDs, the CLI
reference page), not part of the installed package."""
