"""Tests of the embedded dev stack (drctl.devstack)."""
