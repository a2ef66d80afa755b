"""`python -m openforge.cli`: the `openforge` command."""

from openforge.cli import main

main()
