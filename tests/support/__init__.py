"""Test support: the one copy of each fixture and helper the tests share.

- `devstack`: the session dev stack, its config and its baseline; `workers`: drctl's in-process
  workers on it, and what the workflow tests read from the fleet.
- `temporal`: a private Temporal dev server; `moto`: a moto server; `http_stub`: the HTTP stub
  server every stand-in is built on; `cli`: the CLI runner; `config`: the config writers.
- `ports`, `wait`: free loopback ports, polling.

Tests import from here, never from a conftest or from another test module; conftests only register
these fixtures.
"""
