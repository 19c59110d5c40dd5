"""The Prometheus figures activities and the worker record (never workflow code: it replays)."""
