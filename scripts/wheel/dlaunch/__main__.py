"""`python -m dlaunch ARGS`: exec the native dlaunch with ARGS (see __init__.py)."""
from dlaunch import main

main()
