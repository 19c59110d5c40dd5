"""The worker process: its Temporal workers, HTTP endpoint, registry, fleet metrics and logs."""
