from drctl.cli.entry import run

run()
