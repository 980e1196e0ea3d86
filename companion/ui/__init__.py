"""The fleet page (`companion ui`): a read-only local web page of the fleet
folder. view.py makes what it shows from the CLI's own queries, server.py
serves it and page.html (no build step, nothing fetched from elsewhere)."""
