"""The serving process: the loop, lifecycle, leader election, endpoints, auth, certs, metrics,
logs and options."""
