class UserError(Exception):
    """An error the user can fix: the CLI prints it as one line and exits 2."""
