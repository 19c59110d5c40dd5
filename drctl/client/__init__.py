"""drctl as a Temporal client: the connection, the payload codec, starting and following operations."""
