"""Which lines need a signed batch, and a seal record's id, SEQ and slot
(core/batch.py's per-line half; batch.py imports these and adds the
records' parse, the signature check and the Verifier).

Portable core: runs unchanged on MicroPython and CPython. A board checks
each line it takes with these (device/trust.py): a delivery with no seal
record nor fleet line in it (other boards' records) never loads batch.py,
its RSA code nor its Verifier (docs/mqtt.md#memory).
"""
import binascii

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

SEQ_W = const(8)
SLOT_AT = const(9)       # len('.b @0001 '): a slot record's SEQ starts here

# kinds of fleet records (".X ...") written by boards, not by the companion:
# they carry a device MAC instead of a batch.
DEVICE_KINDS = ".s"


def needs_batch(line):
    """True for lines only the fleet's owner may write (jobs, cancels, .h, .t)."""
    if isinstance(line, (bytes, bytearray)):
        line = line.decode()
    if not ("!" <= line[:1] <= "~" and "!" <= line[-1:] <= "~"):
        # (a line that starts and ends with a printable ASCII character,
        # as every canonical line does, has nothing to strip: no copy of it)
        line = line.strip()
    if not line or line[0] == "#":
        return False
    if line[0] == ".":
        k = line[:2]
        return not (k == ".b" or k == ".k" or k in DEVICE_KINDS.split())
    sp = line.find(" ")
    if sp < 0:
        return True
    if "!" <= line[sp + 1:sp + 2] <= "~":
        rest = line[sp + 1:sp + 3]    # no whitespace to skip: the kind's first two characters
    else:
        rest = line[sp:].lstrip()
    # results and leader assignments (ID a ...) are device-written: MACs, not batches
    return not (rest[:2] == "r " or rest == "r" or rest[:2] == "a ")


def slot_of(line):
    """'.b @SLOT ' (the prefix every version of the slot shares) of a slot
    record, else None."""
    if line[:4] == ".b @":
        return line[:SLOT_AT]
    return None


def rec_id(line):
    """A .b/.k record's kind and SEQ, as text ('.b 00000007', '.b @0003
    00000020'): equal for the same record; None for other lines."""
    k = line[:3]
    if k != ".b " and k != ".k ":
        return None
    if line[3:4] == "@":
        return line[:SLOT_AT + SEQ_W]
    return line[:3 + SEQ_W]


def rec_seq(line):
    """The SEQ of a .b/.k record (int), or -1 when it has none readable."""
    i = rec_id(line)
    s = i[-SEQ_W:] if i else ""
    return int(s) if len(s) == SEQ_W and s.isdigit() else -1


def ingest_key(line):
    """Sort key for feeding a Verifier: .b and .k records by SEQ, then the lines."""
    if isinstance(line, (bytes, bytearray)):
        line = line.decode()
    i = rec_id(line)
    if i:
        return (0, i[-SEQ_W:], line)
    return (1, "", line)


def held_digests(line):
    """The digests (bytes, DIGEST a line) of a .b record the store holds,
    without checking its signature (it was checked on arrival); None for
    other lines or one that does not read."""
    if line[:3] != ".b ":
        return None
    a = line.find(" ", 12 if line[3:4] != "@" else SLOT_AT + 9)
    b = line.find(" ", a + 1)
    try:
        if line[3:4] == "@":
            return binascii.a2b_base64(line[a + 1:b])
        return binascii.unhexlify(line[a + 1:b])
    except Exception:
        return None
