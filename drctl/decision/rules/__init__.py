"""The rules of the decision, one small module each, in priority order (docs/decisions.md)."""
