"""The podium command line: parse arguments, call the API, render results."""
