"""The verbs of the companion CLI: argparse and printing only, one module per
verb group (cli.py holds the one table of verbs)."""
