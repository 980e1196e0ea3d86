"""Virtual boards: the unix port on a pseudo-terminal (board, relay, process,
cmd), the emulated Pico (rp2, rp2emu/) and the files the unix board boots
with (onboard/)."""
