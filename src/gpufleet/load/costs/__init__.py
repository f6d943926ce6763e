"""Cost inputs: price sheets, what a live cluster ran and used from Prometheus, and a
replay's cost records read back."""
