"""core/ed25519.py, a board's own signature: RFC 8032 vectors and
`cryptography` as the oracle, on CPython and on MicroPython (the same module
runs on both; MicroPython has no sha512, so its SHA-512 is the module's own)."""
import hashlib
import json
import os
import random

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519 as ced
from hypothesis import given, settings, strategies as st

from sporadic.core import ed25519, edcurve, sha512
from tests.test_trust_core import run_mp

# RFC 8032 7.1, tests 1, 2, 3 and 1024 (SECRET KEY, PUBLIC KEY, MESSAGE, SIGNATURE)
RFC = [
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
]


def oracle_cases(n=12, seed=7):
    """(seed, pub, msg, sig, ok) made by `cryptography`, and tampered ones."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        sk = ced.Ed25519PrivateKey.from_private_bytes(bytes(rnd.randrange(256) for _ in range(32)))
        sd = sk.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                              serialization.NoEncryption())
        pub = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        msg = bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 1, 80, 111, 112, 128, 200))))
        sig = sk.sign(msg)
        out.append((sd, pub, msg, sig, True))
        bad = bytearray(sig)
        bad[rnd.randrange(64)] ^= 1 << rnd.randrange(8)
        out.append((sd, pub, msg, bytes(bad), False))
        out.append((sd, pub, msg + b"x", sig, False))
    # S >= L (malleability), a key that is no point, wrong lengths
    sd, pub, msg, sig, _ = out[0]
    s = int.from_bytes(sig[32:], "little") + edcurve.L
    out.append((sd, pub, msg, sig[:32] + s.to_bytes(32, "little"), False))
    out.append((sd, bytes([2]) + bytes(31), msg, sig, False))
    out.append((sd, pub[:31], msg, sig, False))
    out.append((sd, pub, msg, sig[:63], False))
    return out


def test_rfc8032_vectors_cpython():
    for sk, pk, m, sg in RFC:
        sk, pk, m, sg = (bytes.fromhex(x) for x in (sk, pk, m, sg))
        assert ed25519.public(sk) == pk
        assert ed25519.sign(sk, m) == sg
        assert ed25519.sign(sk, m, pk) == sg
        assert ed25519.verify(pk, m, sg)


def test_matches_cryptography_cpython():
    for sd, pub, msg, sig, ok in oracle_cases():
        assert ed25519.verify(pub, msg, sig) is ok
        if ok:
            assert ed25519.public(sd) == pub
            assert ed25519.sign(sd, msg) == sig     # deterministic: byte for byte


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=300))
def test_own_sha512_matches_hashlib(data):
    assert sha512._sha512_py(data) == hashlib.sha512(data).digest()


def test_key_text():
    pub = bytes(range(32))
    t = ed25519.pub_text(pub)
    assert t == "ed25519:" + pub.hex() and ed25519.parse_pub(t) == pub
    for bad in (t[:-1], t.upper(), "rsa2048:" + pub.hex(), t[:-2] + "zz"):
        assert ed25519.parse_pub(bad) is None


def test_micropython_against_rfc_and_cryptography(tmp_path):
    # one MicroPython run: the RFC vectors and the oracle's cases (fewer:
    # each verify is ~10 ms of the unix port), signed and checked there
    cases = [[sk, pk, m, sg, True, True] for sk, pk, m, sg in RFC]
    cases += [[sd.hex(), pub.hex(), msg.hex(), sig.hex(), ok, False]
              for sd, pub, msg, sig, ok in oracle_cases(n=3)]
    path = os.path.join(str(tmp_path), "v.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    out = run_mp("""
import json, binascii
from sporadic.core import ed25519
import hashlib
print('sha512' in dir(hashlib))
u = binascii.unhexlify
for sk, pk, m, sg, ok, rfc in json.load(open(%r)):
    sk, pk, m, sg = u(sk), u(pk), u(m), u(sg)
    r = ed25519.verify(pk, m, sg)
    if ok and len(pk) == 32 and pk[0] != 2:
        r = r and ed25519.public(sk) == pk and ed25519.sign(sk, m, pk) == sg
    print('ok' if r == ok else 'FAIL')
""" % path, tmp_path, heap="64K", timeout=300)
    res = out.split()
    assert res[0] == "False"          # the module's own SHA-512 was the one used
    assert res[1:] == ["ok"] * len(cases)


@pytest.mark.needs('micropython', 'mpy-cross')
def test_a_board_checks_a_records_signature_with_its_hash_and_its_curve_apart():
    # recsig.verify as a board runs it (the firmware as .mpy, 64-bit unix
    # port): the hash with core/sha512.py alone in RAM, then the curve with
    # core/edcurve.py alone, each let go after. At 33K: the one ed25519.py
    # of before (hash and curve loaded together) needed 37K, this 30K.
    from sporadic.core import recsig
    from tests.mpy import run_mpy
    seed = bytes(range(32))
    pub = ed25519.public(seed)
    text = "3k1v0a9c r pump-1 12 1796968800 ok - blinked 3 times at the pump house"
    f = text.split(" ", 7)
    f[6] = recsig.sign(seed.hex(), pub.hex(), text, "0123456789abcdef")
    good = " ".join(f)
    forged = good.replace("blinked 3", "blinked 4")
    other = ed25519.public(bytes(32))
    out = run_mpy("""
import binascii
from sporadic.core import recsig
pub = binascii.unhexlify(%r)
print(recsig.verify(pub, %r), recsig.verify(pub, %r), recsig.verify(binascii.unhexlify(%r), %r))
print('sporadic.core.sha512' in sys.modules, 'sporadic.core.edcurve' in sys.modules)
""" % (pub.hex(), good, forged, other.hex(), good), heap="33K")
    assert out.split() == ["True", "False", "False", "False", "False"]
