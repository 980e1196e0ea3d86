"""The desktop companion of sporadic: the `companion` command (cli.py) and the library under it."""
