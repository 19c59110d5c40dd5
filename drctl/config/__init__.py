"""The fleet configuration: one pydantic tree (`schema`), its sections and the warnings it raises."""
