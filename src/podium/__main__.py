"""`python -m podium` runs the CLI."""

from podium.cli.main import main

main()
