"""The command line (typer): wiring, no logic."""
