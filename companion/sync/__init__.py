"""Talking to a board over a link: deploy, sync, serve (syncer); the fleet
through an MQTT broker (mqtt)."""
