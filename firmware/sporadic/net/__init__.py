"""The network: framing on the wire, the TCP sync server, board-to-board sync and heartbeats (boards with Wi-Fi; the unix port)."""
