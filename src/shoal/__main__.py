"""`python -m shoal` is the `shoal` command."""

from shoal.cli.main import main

main()
