from drctl.cli.main import run

run()
