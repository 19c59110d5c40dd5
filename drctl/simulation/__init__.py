"""A deterministic fleet simulator for drctl's decision core (issue 26), in simulated time.

Seeded worlds of 2 to 5 regions (world.py) suffer one family's faults (faults.py, scenarios.py); the
monitor's evidence is observed from them with seeded noise (observe.py); a policy, the core's
`decide` or a plain interval x threshold baseline (policies.py), decides every tick; the loop
(run.py) applies the decision, asserts drctl.decision.invariants after every one, and measures the
run against the world's truth (report.py). `python -m drctl.simulation --seed N --family F` replays
one world and prints its trace. Pure: no wall clock, no threads, no I/O.
"""
