"""The trust core (sporadic.rsa, sporadic.hmac, sporadic.batch) on CPython AND
on the MicroPython unix port (-X heapsize=64K), against signatures made by
`cryptography` through companion.fleet.keys.

Each batch threat of docs/security.md is a scenario run by one portable
runner on both interpreters; both must refuse with the same reason.
"""
import binascii
import hashlib
import hmac as pyhmac
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FW = os.path.join(ROOT, "firmware")
for p in (FW, ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

from companion.fleet import keys  # noqa: E402
from sporadic.core import batch, rsa  # noqa: E402
from sporadic.desktop import batching
from sporadic.core import hmac as shmac  # noqa: E402
from tests.mpy import MICROPYTHON



def run_mp(script, tmp_path, heap="64K", timeout=120):
    path = os.path.join(str(tmp_path), "mp_script.py")
    with open(path, "w") as f:
        f.write("import sys\nsys.path.insert(0, %r)\n" % FW)
        f.write(script)
    r = subprocess.run([MICROPYTHON, "-X", "heapsize=" + heap, path], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fleet"))
    keys.init_keys(d)
    return d


@pytest.fixture(scope="module")
def other_fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("other"))
    keys.init_keys(d)
    return d


def lines_a():
    return [
        ".h pump-1",
        ".h pump-2",
        ".t 1796104800",
        "3k1v0a9c each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h",
        "7q2m0c4d cancel",
    ]


def lines_b():
    return [
        "a1b2c3d4 who:pump 2026-12-01T07:00Z relay on 2 30 ; within=1h",
        "b1b2c3d4 one 2026-12-01T00:00Z backup rotate ; every=1d grace=1h",
    ]


# ---------------------------------------------------------------- rsa

def test_key_files(fleet):
    st_ = os.stat(os.path.join(fleet, "keys", "fleet.pem"))
    assert st_.st_mode & 0o777 == 0o600
    pub = keys.load_pub(fleet)
    assert pub.startswith("rsa2048:")
    n, e = rsa.parse_pubkey(pub)
    assert e == 65537 and n.bit_length() == 2048
    assert rsa.format_pubkey(n, e) == pub
    assert len(keys.keyid(fleet)) == 8
    with pytest.raises(FileExistsError):
        keys.init_keys(fleet)


def test_private_key_mode_enforced(tmp_path):
    d = str(tmp_path)
    keys.init_keys(d)
    os.chmod(os.path.join(d, "keys", "fleet.pem"), 0o644)
    from companion.errors import UserError
    with pytest.raises(UserError, match=r'readable by others \(mode 644\): chmod 600 it'):
        keys.load_private(d)


@pytest.mark.parametrize("bad", ["", "rsa2048", "rsa1024:ff", "dsa:ff", "rsa2048:zz", "rsa2048:" + "f" * 255 + "e"])
def test_parse_pubkey_refuses(bad):
    with pytest.raises(ValueError):
        rsa.parse_pubkey(bad)


def _flip(b, i):
    b = bytearray(b)
    b[i // 8] ^= 1 << (i % 8)
    return bytes(b)


def rsa_vectors(fleet):
    """(n, e, digest, sig, expected) made with cryptography, and their bit flips."""
    pub = keys.load_pub(fleet)
    n, e = rsa.parse_pubkey(pub)
    out = []
    for i, msg in enumerate([b"", b"a", b".b 00000001 ...", os.urandom(300)]):
        dg = hashlib.sha256(msg).digest()
        sig = keys.sign_digest(fleet, dg)
        out.append((n, e, dg, sig, True))
        out.append((n, e, _flip(dg, 7 * i + 3), sig, False))          # message
        out.append((n, e, dg, _flip(sig, 97 * i + 5), False))         # signature
        out.append((n ^ (1 << (13 * i + 200)), e, dg, sig, False))    # key
        out.append((n, 3, dg, sig, False))                            # exponent
    dg = hashlib.sha256(b"x").digest()
    sig = keys.sign_digest(fleet, dg)
    out.append((n, e, dg, sig[1:], False))                            # short
    out.append((n, e, dg, b"\x00" * 256, False))                      # zero
    out.append((n, e, dg, n.to_bytes(256, "big"), False))             # s >= n
    out.append((n, e, dg[:31], sig, False))                           # digest length
    # weak keys are refused by verify itself, not only by parse_pubkey:
    # e = 1 makes the padded digest its own valid-looking signature,
    pad = b"\x00\x01" + b"\xff" * (256 - 3 - len(rsa._DI) - 32) + b"\x00" + rsa._DI + dg
    out.append((n, 1, dg, pad, False))
    out.append((n, 2, dg, sig, False))                                # even exponent
    # and a genuine signature under a 1024-bit key proves nothing
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa as crsa
    small = crsa.generate_private_key(public_exponent=65537, key_size=1024)
    ssig = small.sign(b"x", padding.PKCS1v15(), hashes.SHA256())
    out.append((small.public_key().public_numbers().n, 65537, dg, ssig, False))
    return out


def test_modexp_fallback(fleet):
    n, e = rsa.parse_pubkey(keys.load_pub(fleet))
    for b in (0, 1, 2, n - 1, int.from_bytes(os.urandom(255), "big")):
        assert rsa._modexp(b, e, n) == pow(b, e, n)


def test_covers(fleet):
    a = lines_a()
    rec = keys.sign_batch(a, keys.next_seq(fleet), fleet)
    ds = batching.digests_of(rec)
    assert all(batching.covers(ds, ln) for ln in a)
    assert all(batching.covers(ds, ln + "\n") for ln in a)
    assert not batching.covers(ds, _tamper(a[3]))


def test_rsa_verify_cpython(fleet):
    for n, e, dg, sig, ok in rsa_vectors(fleet):
        assert rsa.verify(n, e, dg, sig) is ok


@pytest.mark.needs("micropython")
def test_rsa_verify_micropython(fleet, tmp_path):
    vec = [["%x" % n, e, dg.hex(), sig.hex(), ok] for n, e, dg, sig, ok in rsa_vectors(fleet)]
    with open(os.path.join(str(tmp_path), "v.json"), "w") as f:
        json.dump(vec, f)
    out = run_mp("""
import json, binascii
from sporadic.core import rsa
for n, e, dg, sig, ok in json.load(open(%r)):
    r = rsa.verify(int(n, 16), e, binascii.unhexlify(dg), binascii.unhexlify(sig))
    print('ok' if r == ok else 'FAIL')
    b = int(sig, 16) if sig else 0
    print('ok' if rsa._modexp(b, e, int(n, 16)) == pow(b, e, int(n, 16)) else 'FAIL')
print(rsa.keyid(%r))
""" % (os.path.join(str(tmp_path), "v.json"), keys.load_pub(fleet)), tmp_path)
    res = out.split()
    assert res[:-1] == ["ok"] * (2 * len(vec))
    assert res[-1] == keys.keyid(fleet)


# numbers whose top nibble is anything from 1 to f, about every size a key
# has (and a few it never has): the size by bisection, the hex from the bytes
# (rsa._bits, format_pubkey: a key's id and its parse at every sync)
SIZES = [(b << k) | 1 for k in (0, 1, 7, 63, 64, 65, 1023, 2044, 2045, 2046, 2047, 4095, 5000) for b in (1, 2, 3, 8, 15)]


def test_key_size_and_text_cpython():
    for n in SIZES:
        assert rsa._bits(n) == n.bit_length()
        assert rsa.format_pubkey(n, 3) == "rsa%d:%x:3" % (n.bit_length(), n)
    assert rsa._bits(0) == 0


@pytest.mark.needs("micropython")
def test_key_size_and_text_micropython(tmp_path):
    out = run_mp("""
from sporadic.core import rsa
for n in %r:
    print(rsa._bits(n), rsa.format_pubkey(n, 3))
""" % (SIZES,), tmp_path)
    assert out.split() == [w for n in SIZES for w in (str(n.bit_length()), "rsa%d:%x:3" % (n.bit_length(), n))]


# ---------------------------------------------------------------- hmac

@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=300))
def test_hmac_matches_cpython(key, msg):
    assert shmac.hmac_sha256(key, msg) == pyhmac.new(key, msg, hashlib.sha256).digest()


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_compare(a, b):
    assert shmac.compare(a, b) == (a == b)


def hmac_vectors():
    out = []
    for k in (b"", b"k", b"\x00" * 64, b"K" * 65, bytes(range(200))):
        for m in (b"", b"3k1v0a9c r pump-1 12 1796968800 ok - blinked 3", bytes(range(256)) * 3):
            out.append((k.hex(), m.hex(), pyhmac.new(k, m, hashlib.sha256).hexdigest()))
    return out


def test_result_mac():
    secret = keys.new_device_secret()
    assert len(secret) == 64
    line = "3k1v0a9c r pump-1 12 1796968800 ok - blinked 3"
    mac = keys.mac_result(secret, line)
    assert len(mac) == 16
    assert mac == pyhmac.new(bytes.fromhex(secret), line.encode(), hashlib.sha256).hexdigest()[:16]
    assert keys.check_result(secret, line, mac)
    assert not keys.check_result(secret, line.replace("12", "13"), mac)
    assert not keys.check_result(keys.new_device_secret(), line, mac)
    assert not keys.check_result(secret, line, mac[:15])
    assert not keys.check_result("zz", line, mac)


@pytest.mark.needs("micropython")
def test_hmac_micropython(tmp_path):
    vec = hmac_vectors()
    out = run_mp("""
import binascii
from sporadic.core import hmac
for k, m, want in %r:
    got = binascii.hexlify(hmac.hmac_sha256(binascii.unhexlify(k), binascii.unhexlify(m))).decode()
    print('ok' if got == want and hmac.compare(got, want) and not hmac.compare(got, want[:-1] + 'x') else 'FAIL')
print(hmac.mac_result('00' * 32, 'abc'))
""" % (vec,), tmp_path)
    res = out.split()
    assert res[:-1] == ["ok"] * len(vec)
    assert res[-1] == pyhmac.new(bytes(32), b"abc", hashlib.sha256).hexdigest()[:16]


# ---------------------------------------------------------------- batches

# One portable runner: the same text runs on CPython (exec) and MicroPython.
RUNNER = r"""
from sporadic.core import batch

def run_scenario(sc):
    v = batch.Verifier(sc["keys"], sc["hwm"], held=sc.get("held", ()), retired=sc.get("retired", ()))
    out = []
    for line in sc["feed"]:
        out.append(v.take(line))
    return {"results": out, "hwm": v.hwm, "keys": sorted(v.keytexts()), "retired": v.retired}
"""


def run_cpython(scenarios):
    ns = {}
    exec(RUNNER, ns)
    return [ns["run_scenario"](sc) for sc in scenarios]


def run_micropython(scenarios, tmp_path):
    vpath = os.path.join(str(tmp_path), "sc.json")
    with open(vpath, "w") as f:
        json.dump(scenarios, f)
    out = run_mp(RUNNER + """
import json
for sc in json.load(open(%r)):
    print(json.dumps(run_scenario(sc)))
""" % vpath, tmp_path)
    return [json.loads(ln) for ln in out.splitlines() if ln.strip()]


def _tamper(line):
    return line.replace("blink 3", "blink 4")


def scenarios(fleet, other_fleet):
    pub = keys.load_pub(fleet)
    a = lines_a()
    b = lines_b()
    [ba] = keys.sign_lines(fleet, a)
    [bb] = keys.sign_lines(fleet, b)
    seq_a = batch.parse_batch(ba)[0]
    seq_b = batch.parse_batch(bb)[0]
    [bo] = keys.sign_lines(other_fleet, a)
    fa, fb = ba.split(" "), bb.split(" ")
    # mix of two batches: A's header and digests with B's signature; A's
    # digests under B's seq; A's digests plus one of B's under A's signature
    mix1 = " ".join(fa[:4] + fb[4:])
    mix2 = " ".join([fa[0], fb[1], fa[2], fa[3], fa[4]])
    dl = sorted(set([fa[3][i:i + 16] for i in range(0, len(fa[3]), 16)] + [fb[3][:16]]))
    mix3 = " ".join([fa[0], fa[1], fa[2], "".join(dl), fa[4]])
    trunc = " ".join(fa[:3] + [fa[3][:-16], fa[4]])
    sc = {}
    sc["good"] = ({"keys": [pub], "hwm": 0, "feed": [ba] + a + [bb] + b},
                  [None] * (len(a) + len(b) + 2))
    sc["forged line"] = ({"keys": [pub], "hwm": 0, "feed": [ba, "9zzzzzzz each 2026-12-01T06:00Z shell rm ; within=1h", ".h evil"]},
                         [None, "not signed", "not signed"])
    sc["tampered line in good batch"] = ({"keys": [pub], "hwm": 0, "feed": [ba, _tamper(a[3]), a[4]]},
                                         [None, "not signed", None])
    sc["unsigned line, no batch"] = ({"keys": [pub], "hwm": 0, "feed": a[:1]}, ["not signed"])
    sc["replay of old batch (seq <= hwm, compacted away)"] = (
        {"keys": [pub], "hwm": seq_b, "feed": [ba, a[3]]}, ["replay", "not signed"])
    sc["rollback: older batch after newer in one ingest"] = (
        {"keys": [pub], "hwm": seq_a, "feed": [bb, ba] + b + a[3:]},
        [None, "replay", None, None, "not signed", "not signed"])
    sc["held batch re-delivered is fine"] = (
        {"keys": [pub], "hwm": seq_b, "held": [seq_a], "feed": [ba, a[3]]}, [None, None])
    sc["batch from another fleet"] = ({"keys": [pub], "hwm": 0, "feed": [bo, a[3]]}, ["unknown key", "not signed"])
    sc["mix: header of A, signature of B"] = ({"keys": [pub], "hwm": 0, "feed": [mix1, a[3]]}, ["bad signature", "not signed"])
    sc["mix: A under B's seq"] = ({"keys": [pub], "hwm": 0, "feed": [mix2, a[3]]}, ["bad signature", "not signed"])
    sc["mix: B's line spliced into A"] = ({"keys": [pub], "hwm": 0, "feed": [mix3, b[0]]}, ["bad signature", "not signed"])
    sc["mix: line of B under A only"] = ({"keys": [pub], "hwm": 0, "feed": [ba, b[0]]}, [None, "not signed"])
    sc["truncated batch"] = ({"keys": [pub], "hwm": 0, "feed": [trunc, a[0]]}, ["bad signature", "not signed"])
    sc["malformed batch"] = ({"keys": [pub], "hwm": 0, "feed": [".b 1 x y z", ".b 00000001 " + fa[2] + " 12 " + fa[4], ba[:-4]]},
                             ["bad batch record", "bad batch record", "bad batch record"])
    sc["results and comments need no batch"] = (
        {"keys": [pub], "hwm": 0, "feed": ["3k1v0a9c r pump-1 12 1796968800 ok 0123456789abcdef x", "# hi", ""]},
        [None, None, None])
    return sc, pub


def _check(sc, got):
    for name, (inp, want) in sc.items():
        res = got[name]["results"]
        assert len(res) == len(want), name
        for r, w in zip(res, want):
            if w is None:
                assert r is None, (name, r)
            else:
                assert r is not None and w in r, (name, r, w)


def test_batch_threats_cpython(fleet, other_fleet):
    sc, pub = scenarios(fleet, other_fleet)
    got = dict(zip(sc, run_cpython([v[0] for v in sc.values()])))
    _check(sc, got)
    seq_b = batch.parse_batch(sc["good"][0]["feed"][len(lines_a()) + 1])[0]
    assert got["good"]["hwm"] == seq_b
    assert got["replay of old batch (seq <= hwm, compacted away)"]["hwm"] == seq_b


@pytest.mark.needs("micropython")
def test_batch_threats_micropython(fleet, other_fleet, tmp_path):
    sc, pub = scenarios(fleet, other_fleet)
    inputs = [v[0] for v in sc.values()]
    mp = run_micropython(inputs, tmp_path)
    got = dict(zip(sc, mp))
    _check(sc, got)
    assert mp == run_cpython(inputs)      # one implementation: same reasons, same state


def rotation_scenarios(tmp_path):
    d = str(tmp_path / "rot")
    keys.init_keys(d)
    old_pub = keys.load_pub(d)
    old_id = keys.keyid(d)
    a = lines_a()
    [b1] = keys.sign_lines(d, a[:2])
    krec = keys.rotate(d)
    new_pub = keys.load_pub(d)
    resigned = keys.sign_lines(d, a)            # the live lines, under the new key
    # after rotation, a record still signed with the old key (e.g. the old key leaked)
    old_key = keys.serialization.load_pem_private_key(
        open(os.path.join(d, "keys", "old", old_id + ".pem"), "rb").read(), None)
    late_old = batching.make_batch_record(
        keys.next_seq(d), old_id, [batch.line_digest(ln) for ln in a[3:]], lambda dg: keys._sign(old_key, dg))
    forged_k = batching.make_key_record(keys.next_seq(d), old_id, keys.pub_text_of(keys._new_key()),
                                     lambda dg: keys._sign(old_key, dg))
    sc = {
        "rotation in seq order": ({"keys": [old_pub], "hwm": 0, "feed": sorted([b1, krec] + resigned + [late_old], key=batch.ingest_key) + a[3:]},
                                  [None, None, None, "retired key", None, None]),
        "rotation, then old key refused": ({"keys": [old_pub], "hwm": 0, "feed": [krec, b1, late_old, forged_k, a[3]]},
                                           [None, "retired key", "retired key", "retired key", "not signed"]),
        "held rotation re-fed": ({"keys": [new_pub], "hwm": 99, "held": [batch.parse_key(krec)[0]], "feed": [krec]}, [None]),
        "rotation by a stranger": ({"keys": [new_pub], "hwm": 0, "feed": [forged_k]}, ["unknown key"]),
    }
    return sc, old_pub, new_pub, old_id


def test_rotation_cpython(tmp_path):
    sc, old_pub, new_pub, old_id = rotation_scenarios(tmp_path)
    got = dict(zip(sc, run_cpython([v[0] for v in sc.values()])))
    _check(sc, got)
    r = got["rotation, then old key refused"]
    assert r["keys"] == [new_pub] and r["retired"] == [old_id]


@pytest.mark.needs("micropython")
def test_rotation_micropython(tmp_path):
    sc, old_pub, new_pub, old_id = rotation_scenarios(tmp_path)
    inputs = [v[0] for v in sc.values()]
    mp = run_micropython(inputs, tmp_path)
    _check(sc, dict(zip(sc, mp)))
    assert mp == run_cpython(inputs)


def test_sign_lines_splits_and_skips(fleet):
    lines = ["%08d each 2026-12-01T06:00Z log n%d" % (i, i) for i in range(300)]
    lines += ["00000001 r pump-1 1 2 ok - x", "# c", "", lines[0]]
    recs = keys.sign_lines(fleet, lines)
    assert [len(batch.parse_batch(r)[2]) // 8 for r in recs] == [128, 128, 44]
    seqs = [batch.parse_batch(r)[0] for r in recs]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert [batch.ingest_key(r) for r in recs] == sorted(batch.ingest_key(r) for r in recs)
    with pytest.raises(ValueError):
        batching.make_batch_record(1, "00000000", [b"\x00" * 8] * 0, lambda d: b"")


@pytest.mark.needs("micropython")
@pytest.mark.slow
def test_5000_lines_stream_in_64k(fleet, tmp_path):
    """A 5,000-line ingest, sent batch by batch, verifies under -X heapsize=64K:
    the Verifier holds one window of digests, never the file's. The firmware
    as .mpy, as a board has it: compiled from source in the same heap, the
    check code's compilation left it too cut up for a 2 KB record once the
    code grew (#31/#32's lazy modules), with a longer temp path only."""
    from tests.mpy import run_mpy
    lines = ["%08x each 2026-12-01T06:00Z log hello number %d ; within=1h" % (i, i) for i in range(5000)]
    path = os.path.join(str(tmp_path), "ingest.txt")
    with open(path, "w") as f:
        for i in range(0, len(lines), batch.MAX_LINES):
            chunk = lines[i:i + batch.MAX_LINES]
            f.write(keys.sign_batch(chunk, keys.next_seq(fleet), fleet) + "\n")
            for ln in chunk:
                f.write(ln + "\n")
        f.write("deadbeef each 2026-12-01T06:00Z log forged ; within=1h\n")
    out = run_mpy("""
import gc
from sporadic.core import batch
v = batch.Verifier([%r], 0)
ok = bad = 0
peak = 0
with open(%r) as f:
    for line in f:
        r = v.take(line.rstrip('\\n'))
        if r is None:
            ok += 1
        else:
            bad += 1
        if ok %% 97 == 0:
            gc.collect()
            peak = max(peak, gc.mem_alloc())
print(ok, bad, v.hwm, peak)
""" % (keys.load_pub(fleet), path), heap="64K", timeout=300)
    ok, bad, hwm, peak = [int(x) for x in out.split()]
    print("5000-line ingest under 64K heap: peak gc.mem_alloc", peak)
    assert bad == 1
    assert ok == 5000 + (5000 + batch.MAX_LINES - 1) // batch.MAX_LINES
    assert peak < 48 * 1024
