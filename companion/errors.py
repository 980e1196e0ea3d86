"""UserError (what a user can cause and fix: one line from the CLI) and the shared rich console."""


class UserError(Exception):
    """An error the user can fix: the CLI prints it as one line and exits 2."""


def console():
    """A rich console for tables: the terminal's width, or 120 columns when
    the output goes to a file or a pipe (rich would assume 80 and cut)."""
    import sys
    from rich.console import Console
    return Console() if sys.stdout.isatty() else Console(width=120)
