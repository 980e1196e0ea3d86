"""Links: how the companion reaches boards (issue #30 moves the serial and
TCP links here; the broker link, mqtt.py, starts here)."""
