"""Board data: one folder a board, each with board.json (facts) and board.py
(the device module copied to /lib/board.py). Installed as `sporadic_boards`.

    load(name) -> dict    board.json with "0x..." strings turned into ints
    names() -> list       the boards known, sorted
    folder(name) -> path  the board's folder (board.py lives there)
"""
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def names():
    return sorted(
        n for n in os.listdir(_HERE)
        if os.path.isfile(os.path.join(_HERE, n, "board.json"))
    )


def folder(name):
    path = os.path.join(_HERE, name)
    if not os.path.isfile(os.path.join(path, "board.json")):
        raise KeyError("unknown board %r (known: %s)" % (name, ", ".join(names())))
    return path


def _ints(value):
    if isinstance(value, str) and value[:2] in ("0x", "0X"):
        return int(value, 16)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def load(name):
    with open(os.path.join(folder(name), "board.json")) as f:
        data = _ints(json.load(f))
    return data


def board_py(name):
    """Path of the board's device module, or None (unix: written elsewhere)."""
    path = os.path.join(folder(name), "board.py")
    return path if os.path.isfile(path) else None
