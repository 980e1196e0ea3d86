"""Cost of a signed batch on a board, measured on the MicroPython unix port.

    python bench/verify.py [--heap 64K] [--reps 30]

Signs batches of 1, 10 and 100 job lines with a fresh fleet key (companion
keys, cryptography), then runs `micropython -X heapsize=HEAP` as a
subprocess and times, median of REPS:

  - one batch verification: Verifier.add_batch(record) = parse the .b line,
    sha256 of its signed text, pow(sig, 65537, n) and the PKCS#1 check;
  - one sha256 of the same bytes (the .b record), for scale;
  - one line check (sha256 of the line + lookup in the verified batch);
  - rsa.verify alone, and the bare pow(sig, e, n) inside it.

Bytes: a line itself carries nothing; its batch's .b record (header,
16 hex digits per line, base64 signature, newline) is divided over the lines
it covers. The JSON last line has verify_s and sha256_s (the 100-line batch),
sig_bytes_per_line {"1":..,"10":..,"100":..} and the per-size details.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FW = os.path.join(ROOT, "firmware")
for p in (FW, ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

from companion.fleet import keys  # noqa: E402

SIZES = (1, 10, 100)

MP_SCRIPT = r"""
import sys, json, time, hashlib
sys.path.insert(0, %(fw)r)
from sporadic.core import batch
cfg = json.load(open(%(cfg)r))
pub = cfg["pub"]
reps = cfg["reps"]
out = {}
for size in cfg["sizes"]:
    rec = cfg["records"][str(size)]
    line = cfg["lines"][str(size)]
    recb = rec.encode()
    tv = []
    ts = []
    tc = []
    tr = []
    tp = []
    for i in range(reps):
        v = batch.Verifier([pub], 0)
        t0 = time.ticks_us()
        r = v.add_batch(rec)
        t1 = time.ticks_us()
        assert r is None, r
        hashlib.sha256(recb).digest()
        t2 = time.ticks_us()
        r = v.check(line)
        t3 = time.ticks_us()
        assert r is None, r
        seq, kid, dg, sig, blen = batch.parse_batch(rec)
        d = hashlib.sha256(recb[:blen]).digest()
        n, e = v.keys[kid]
        t4 = time.ticks_us()
        batch.rsa.verify(n, e, d, sig)
        t5 = time.ticks_us()
        pow(int.from_bytes(sig, "big"), e, n)
        t6 = time.ticks_us()
        tr.append(time.ticks_diff(t5, t4))
        tp.append(time.ticks_diff(t6, t5))
        tv.append(time.ticks_diff(t1, t0))
        ts.append(time.ticks_diff(t2, t1))
        tc.append(time.ticks_diff(t3, t2))
    out[str(size)] = [tv, ts, tc, tr, tp]
print(json.dumps(out))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heap", default="64K")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    mp = shutil.which("micropython")
    if not mp:
        sys.exit("micropython (the unix port) is not on PATH")
    with tempfile.TemporaryDirectory() as d:
        keys.init_keys(d)
        pub = keys.load_pub(d)
        records, lines = {}, {}
        for size in SIZES:
            ls = ["%08x each 2026-12-01T06:00Z log hello %d ; every=1d within=2h" % (i, i) for i in range(size)]
            records[str(size)] = keys.sign_batch(ls, keys.next_seq(d), d)
            lines[str(size)] = ls[-1]
        cfg = os.path.join(d, "cfg.json")
        with open(cfg, "w") as f:
            json.dump({"pub": pub, "reps": args.reps, "sizes": list(SIZES),
                       "records": records, "lines": lines}, f)
        script = os.path.join(d, "bench.py")
        with open(script, "w") as f:
            f.write(MP_SCRIPT % {"fw": FW, "cfg": cfg})
        r = subprocess.run([mp, "-X", "heapsize=" + args.heap, script], capture_output=True, text=True)
        if r.returncode:
            sys.exit("micropython failed:\n" + r.stdout + r.stderr)
        raw = json.loads(r.stdout.strip().splitlines()[-1])

    detail = {}
    print("micropython unix port, -X heapsize=%s, median of %d" % (args.heap, args.reps))
    print("%6s %12s %12s %12s %12s %10s %14s" % (
        "lines", "record B", "verify ms", "sha256 ms", "verify/sha", "check ms", "sig B / line"))
    for size in SIZES:
        tv, ts, tc, tr, tp = raw[str(size)]
        rv = statistics.median(tr) / 1e6
        pw = statistics.median(tp) / 1e6
        v = statistics.median(tv) / 1e6
        s = statistics.median(ts) / 1e6
        c = statistics.median(tc) / 1e6
        rec_bytes = len(records[str(size)]) + 1          # with its newline
        per_line = rec_bytes / size
        detail[str(size)] = {"record_bytes": rec_bytes, "verify_s": v, "sha256_s": s,
                             "check_line_s": c, "rsa_verify_s": rv, "pow_s": pw, "sig_bytes_per_line": round(per_line, 2)}
        print("%6d %12d %12.3f %12.4f %12.0f %10.4f %14.1f" % (
            size, rec_bytes, v * 1e3, s * 1e3, v / s if s else float("inf"), c * 1e3, per_line))
    big = detail[str(SIZES[-1])]
    print("one verify of a %d-line batch: %.3f ms (rsa.verify %.3f ms, of which pow %.3f ms);"
          " one sha256 of the same %d bytes: %.4f ms"
          % (SIZES[-1], big["verify_s"] * 1e3, big["rsa_verify_s"] * 1e3, big["pow_s"] * 1e3,
             big["record_bytes"], big["sha256_s"] * 1e3))
    print(json.dumps({
        "verify_s": big["verify_s"],
        "sha256_s": big["sha256_s"],
        "sig_bytes_per_line": {k: detail[k]["sig_bytes_per_line"] for k in detail},
        "batches": detail,
        "heap": args.heap,
    }))


if __name__ == "__main__":
    main()
