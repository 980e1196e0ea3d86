# Whether a board checks what it stores (docs/device.md#stamps): pure, no
# I/O. Hashing a file on the flash and the deferred check of jobs.txt are
# device/stampfile.py's.


def signed(cfg):
    """Does a board with this cfg.json check what it stores (trust.py)? Not
    in an insecure fleet, nor on a flash never provisioned with a key."""
    mode = cfg.get('mode')
    return not (mode == 'insecure' or (not mode and not cfg.get('pubkey')))
