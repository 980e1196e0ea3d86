"""The device runtime: flash store, recovery, trust, clock, actions, the loop and the sync server (MicroPython; the unix port too)."""
