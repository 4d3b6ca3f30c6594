"""`python -m podium` runs the CLI."""

from podium.cli.entry import main

main()
