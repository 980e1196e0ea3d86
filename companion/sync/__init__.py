"""Sync: deploy, sync and serve over a link (issue #30 moves syncer.py
here; the broker sync, mqtt.py, starts here)."""
