"""Dynamic Resource Allocation: devices, claims, CEL selectors and the allocator."""
