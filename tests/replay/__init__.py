"""Replay tests: recorded workflow histories must still replay against the current workflow code."""
