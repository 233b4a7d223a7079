"""`python -m api.demo [--profile ...]`: the same as `scalesweep demo`."""

import argparse
import sys

from ._demo import add_arguments, run

parser = argparse.ArgumentParser(prog="python -m api.demo", description="the whole study from one command")
add_arguments(parser)
sys.exit(run(parser.parse_args()))
