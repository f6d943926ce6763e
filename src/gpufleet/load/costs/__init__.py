"""Cost inputs: price sheets, the Prometheus client that reads usage, and recorded cost runs."""
