"""Talking to a board over a link: deploy, sync, serve (syncer)."""
