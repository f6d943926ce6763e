"""The scheduler's vocabulary: jobs, all-or-nothing transactions, outcomes and reasons."""
