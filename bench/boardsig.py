"""Cost of a board's own signature (docs/security.md#board-signatures):
Ed25519 (core/ed25519.py) against RSA-2048, on the MicroPython unix port and
on the emulated Pico (the real rp2 firmware in rp2040js).

    python bench/boardsig.py [--reps 5] [--no-rp2]
    (rp2: SPORADIC_RP2_UF2=RPI_PICO.uf2 SPORADIC_RP2_BOOTROM=rp2040-bootrom-b1.bin)

Per operation, median of REPS, on a record of the size a board signs (a
`one` job's result, 80 bytes):

  ed_sign     ed25519.sign(seed, msg, pub): two SHA-512 (MicroPython has no
              sha512: the module's own), one scalar multiplication
  ed_verify   ed25519.verify(pub, msg, sig): one SHA-512, the key's point
              decoded (a modular root), a double scalar multiplication
  rsa_crt     RSA-2048 signing with the CRT (two 1024-bit pow) + the
              PKCS#1 v1.5 encoding
  rsa_plain   pow(m, d, n), 2048-bit d: the figure the docs had (baseline)
  rsa_verify  core/rsa.py verify (e = 65537)

Unix: `micropython` subprocess, time.ticks_us. rp2: the emulator runs
unpaced; ms are the board's own ticks_us (the emulated chip's clock: the
firmware's 125 MHz); RSA once (slow to emulate), its plain pow left out. Bytes: a public key in a host record
(Ed25519: "ed25519:" + 64 hex; RSA: "rsa2048:" + 512 hex) and a signature
on a record (base64, padded). The last line is JSON.
"""
import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FW = os.path.join(ROOT, 'firmware')
sys.path.insert(0, ROOT)
sys.path.insert(0, FW)

SHARED = os.path.join(os.path.dirname(ROOT), 'shared', 'rp2')
UF2 = os.environ.get('SPORADIC_RP2_UF2') or os.path.join(SHARED, 'RPI_PICO-v1.28.0.uf2')
BOOTROM = os.environ.get('SPORADIC_RP2_BOOTROM') or os.path.join(SHARED, 'rp2040-bootrom-b1.bin')

MSG = '3k1v0a9c r pump-1 12 1796968800 ok - blinked 3 times at the pump house ...'

SETUP = '''
import time, binascii, sys
def _mod(name, src):
    g = {'__name__': name}
    exec(src, g)
    class M: pass
    m = M()
    for k, v in g.items():
        setattr(m, k, v)
    return m
# core/ed25519.py hashes through core/sha512.py (`from sporadic.core import
# sha512`): the package's two modules, without the package on the board
sys.modules['sporadic'] = _mod('sporadic', '')
sys.modules['sporadic.core'] = core = _mod('sporadic.core', '')
core.sha512 = sys.modules['sporadic.core.sha512'] = _mod('sha512', %(sha512)r)
ed = _mod('ed25519', %(ed)r)
rsa = _mod('rsa', %(rsa)r)
seed = binascii.unhexlify(%(seed)r)
pub = ed.public(seed)
msg = %(msg)r
sig = ed.sign(seed, msg, pub)
assert ed.verify(pub, msg, sig)
n = %(n)d
d = %(d)d
p = %(p)d
q = %(q)d
dp = %(dp)d
dq = %(dq)d
qi = %(qi)d
dg = binascii.unhexlify(%(dg)r)
rsig = binascii.unhexlify(%(rsig)r)
em = int.from_bytes(b'\\x00\\x01' + b'\\xff' * 202 + b'\\x00' + rsa._DI + dg, 'big')
def crt(m):
    a = pow(m, dp, p)
    b = pow(m, dq, q)
    return b + q * ((a - b) * qi %% p)
assert pow(crt(em), 65537, n) == em
assert rsa.verify(n, 65537, dg, rsig)
def timed(f, reps):
    us = []
    for i in range(reps):
        t = time.ticks_us()
        f()
        us.append(time.ticks_diff(time.ticks_us(), t))
    return us
OPS = {'ed_sign': lambda: ed.sign(seed, msg, pub), 'ed_verify': lambda: ed.verify(pub, msg, sig),
       'rsa_crt': lambda: crt(em), 'rsa_plain': lambda: pow(em, d, n),
       'rsa_verify': lambda: rsa.verify(n, 65537, dg, rsig)}
print('READY')
'''


def material():
    from cryptography.hazmat.primitives.asymmetric import ed25519 as ced, rsa as crsa, padding
    from cryptography.hazmat.primitives import hashes, serialization
    import hashlib
    sk = ced.Ed25519PrivateKey.generate()
    seed = sk.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                            serialization.NoEncryption())
    rk = crsa.generate_private_key(65537, 2048)
    nums = rk.private_numbers()
    rsig = rk.sign(MSG.encode(), padding.PKCS1v15(), hashes.SHA256())
    src = {}
    for name in ('ed25519', 'sha512', 'rsa'):
        with open(os.path.join(FW, 'sporadic', 'core', name + '.py')) as f:
            src[name] = f.read()
    pub = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    from sporadic.core import rsa
    rpub = rsa.format_pubkey(nums.public_numbers.n, 65537)
    return {'ed': src['ed25519'], 'sha512': src['sha512'], 'rsa': src['rsa'], 'seed': seed.hex(), 'msg': MSG,
            'n': nums.public_numbers.n, 'd': nums.d, 'p': nums.p, 'q': nums.q, 'dp': nums.dmp1,
            'dq': nums.dmq1, 'qi': nums.iqmp, 'dg': hashlib.sha256(MSG.encode()).hexdigest(),
            'rsig': rsig.hex(), '_bytes': {
                'ed_pub_text': len('ed25519:' + pub.hex()), 'rsa_pub_text': len(rpub),
                'ed_sig_b64': len(base64.b64encode(bytes(64))), 'rsa_sig_b64': len(base64.b64encode(rsig))}}


def unix(mat, reps, heap='64K'):
    script = SETUP % mat + '''
import json
out = {}
for k in OPS:
    out[k] = timed(OPS[k], %d)
print('RESULT', json.dumps(out))
''' % reps
    with tempfile.NamedTemporaryFile('w', suffix='.py', delete=False) as f:
        f.write(script)
    try:
        p = subprocess.run(['micropython', '-X', 'heapsize=' + heap, f.name], capture_output=True,
                           text=True, timeout=600)
    finally:
        os.unlink(f.name)
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            us = json.loads(line[7:])
            return {k: round(statistics.median(v) / 1000, 2) for k, v in us.items()}
    raise SystemExit('micropython failed: %s' % (p.stderr or p.stdout)[-800:])


def rp2(mat, reps):
    from companion.vboard.rp2 import RP2VBoard, missing
    why = missing(UF2, BOOTROM)
    if why:
        return {'skipped': why}
    tmp = tempfile.mkdtemp(prefix='boardsig-')
    vb = RP2VBoard(os.path.join(tmp, 'p.flash'), firmware=UF2, bootrom=BOOTROM, unpaced=True,
                   stats=os.path.join(tmp, 'p.stats'))
    port = vb.start()
    try:
        def mp(code, *pre):
            with open(os.path.join(tmp, 's.py'), 'w') as f:
                f.write(code)
            p = subprocess.run([sys.executable, '-m', 'mpremote', 'connect', port] + list(pre) +
                               ['run', os.path.join(tmp, 's.py')], capture_output=True, text=True,
                               timeout=1800)
            if p.returncode:
                raise SystemExit('mpremote failed: %s' % (p.stderr or p.stdout)[-800:])
            return p.stdout
        # one run: the set-up, then each operation (RSA's: once, they are
        # slow to emulate; the plain pow is left out: about 4x the CRT's)
        code = SETUP % mat + '''
import json
out = {}
for k, n in (('ed_sign', %d), ('ed_verify', %d), ('rsa_crt', 1), ('rsa_verify', %d)):
    out[k] = timed(OPS[k], n)
print('RESULT', json.dumps(out))
''' % (reps, reps, reps)
        text = mp(code)
        us = json.loads([ln for ln in text.splitlines() if ln.startswith('RESULT ')][0][7:])
        return {k: round(statistics.median(v) / 1000, 1) for k, v in us.items()}
    finally:
        vb.close() if hasattr(vb, 'close') else None
        vb.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--no-rp2', action='store_true')
    a = ap.parse_args()
    mat = material()
    fig = {'bytes': mat.pop('_bytes'), 'unix_ms': unix(mat, a.reps)}
    print('unix port (64K heap), ms:', fig['unix_ms'], flush=True)
    if not a.no_rp2:
        fig['rp2'] = rp2(mat, a.reps)
        print('emulated Pico:', fig['rp2'], flush=True)
    print('bytes:', fig['bytes'])
    print(json.dumps(fig))


if __name__ == '__main__':
    main()
