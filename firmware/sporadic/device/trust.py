# Device ingest under signed batches (docs/security.md "On a board"): Store.receive hands every
# delivery (a P chunk, a G answer, a file) here first. In a signed fleet a fleet-authored line
# (batchid.needs_batch: jobs, cancels, .h, .t) is kept only when a batch record verified under a
# trusted key covers it: a .b of the same delivery (one RSA verify per batch, never per line) or
# a .b the store already holds (verified when it arrived: a digest look-up, no RSA).
# Device-authored lines (results, assignments) must carry a MAC (the companion checks results;
# boards lack each other's secrets). Everything refused is quarantined with its reason and
# returned to the sender; the good lines of the same delivery are kept.
#
# State (trust.json, next to the store, written atomically after the accepted lines are
# durable): hwm (highest SEQ accepted), keys (trusted key texts), retired (key ids retired by
# .k), cfg_key (cfg.json's pubkey when seeded: a re-deploy with a new key starts over from
# cfg.json). Held SEQs are not copied: they are the .b/.k records in the store itself.
try:
    from micropython import const
except ImportError:  # CPython (tools that read a board's flash)
    def const(x):
        return x
import json
import os
from sporadic.core.order import ID_LEN, own_text
from sporadic.device import stamp, store

batch = None   # sporadic.core.batch (and rsa): imported by the first delivery with a seal or fleet line
bid = None     # sporadic.core.batchid (which lines need a batch): by the first delivery

BACK_MAX = const(3600)   # a signed .t more than this behind a trusted clock is refused
BUF_MAX = const(64)      # uncovered lines of a delivery looked up in held batches at a time
REASONS = const(4)       # last refusal reasons reported in status
SEGS_FREE = const(98304)  # free heap from which a sync keeps the held seals' digests (_held_segs)


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load(root=''):
    """The Trust of the store at root, or None: insecure fleet (cfg mode
    'insecure') or a board never provisioned with a key (no mode, no pubkey:
    bench flash; status says so)."""
    cfg = _load(root + 'cfg.json') or {}
    pub = cfg.get('pubkey')
    if not stamp.signed(cfg):
        # nothing to check: let this module go (a 64K heap recovering a store)
        import sporadic
        sporadic.forget('sporadic.device.trust')
        return None
    t = Trust(root, pub, cfg.get('hwm') or 0)
    t.me = cfg.get('id')
    t.secret = cfg.get('secret')
    return t


class _Stored:
    # the `held` of a Verifier re-checking one of the store's own files:
    # any SEQ may be one the store held (the file no longer says which)
    def __contains__(self, seq):
        return True


class Trust:
    me = None        # this board's id and secret (cfg.json): a result naming
    secret = None    # this board must carry its MAC

    def __init__(self, root, pub, hwm0=0):
        self.path = root + 'trust.json'
        self.tmp = root + 'trust.tmp'
        self.quar = root + 'quar.txt'
        st = _load(self.path)
        if st is None or st.get('cfg_key') != pub:
            # first ingest, or re-deployed with another key: cfg.json decides
            st = {'hwm': (st or {}).get('hwm', 0), 'keys': [pub] if pub else [], 'retired': []}
        self.cfg_key = pub
        # deploy writes the fleet's SEQ at the time (cfg hwm): a re-flashed
        # board refuses everything signed before it, as a compacted one would
        self.hwm = max(st['hwm'], hwm0)
        self.keys = st['keys']
        self.retired = st['retired']
        self.refused = 0          # lines refused by this check (this boot)
        self.clock_note = ''      # the last refused time record
        self._v = None
        self._vc = None           # compactions of the store when _v was kept past its delivery's commit
        self._t = None
        self._hosts = None        # the signed host list (_hosts_known), read once
        self._hkeys = None        # {host: board key (32 bytes)} of its records that carry one
        self._kd = None           # {key id: (n, e)} of self.keys (batch.key_ids), parsed once
        self._segs = None         # (compactions, [digests] or a set of them) of the seals held (_held_segs)
        self._took = []           # this delivery's accepted .b records (added to _segs at commit)

    # ---- one delivery ----

    def _refuse(self, st, raw, why, src, refused):
        st.quarantine(raw, why, src)
        if refused is not None:
            refused.append((raw, why))
        self.refused += 1

    def admit(self, st, lines, src='sync', refused=None, stored=False, keep=False):
        """The lines of one delivery that may be stored (canonical text), and the number refused
        here (unparsable lines with their parse error). `stored`: the delivery is one of the store's
        own files found changed (recover.py): its batch records are checked (signature, key) but may
        be at or below the hwm. `keep`: the digests of the seals the store holds (_held_segs) and, on
        a roomy heap, the Verifier (a first sync's seals come in its first P; each later P read them
        again: ~0.27 s of a Pico's time, docs/budgets.md#27) may be kept for the next delivery till
        the store compacts (a replaced slot's seal may go): a session with no loop, which a reset ends."""
        global batch, bid
        from sporadic.core import batchid as bid   # each line's kind: only once lines arrive
        import sys
        had = list(sys.modules)
        self._took = []
        if not keep:
            self._segs = None   # a loop's heap keeps no copy of them
        if self._vc != st.compactions:
            self._v = None
        self._vc = st.compactions if keep and store.roomy() else None
        out = []
        recs = []
        ref = 0
        wait = []     # fleet lines no batch of this delivery covers (yet)
        dev = []      # device records (results, assignments): their hosts checked last
        # A fleet-authored line is looked up as it came first (raw: its digest in the batches, no
        # parse): one a verified batch covers is, byte for byte, a line the fleet's owner sealed, and the
        # companion seals the canonical text its parser made (companion/fleet/keys.py sign_lines). Only a
        # line no batch covers as it came is parsed (_sort): its canonical text may be the one covered,
        # else it is refused with its parse error or as not signed (~2 M instructions a line on a Pico).
        # (A job line as the companion sends it, 'ID KIND ...', waits with no copy of any part of it:
        # needs_batch's slices were ~1 ms a line on a Pico; one put there wrongly is parsed as before.)
        for raw in lines:
            if (raw.startswith(' ', ID_LEN) and not raw.startswith('r ', ID_LEN + 1)
                    and not raw.startswith('a ', ID_LEN + 1) and raw[0] > '.') or (
                    raw[:1] > ' ' and raw[-1:] > ' ' and raw[:1] != '#' and bid.needs_batch(raw)):
                wait.append(raw)
                continue
            ref += self._sort(st, raw, recs, wait, dev, out, src, refused, None)
        had = _parsed(had)   # (_parsed returns None: the list is done with)
        if not (recs or wait):
            if dev:
                ref += self._hosts_known(st, dev, out, src, refused)
            return out, ref      # results, assignments: no batch to look at
        from sporadic.core import batch   # and rsa: a seal or a fleet line to check
        v = self._v
        held = _Stored() if stored else None
        self._newer = None
        if v is None:
            v = batch.Verifier(self.key_ids(), self.hwm, held or self._held(st, recs), self.retired)
            v.vouch = getattr(st, 'vouch', None)   # the sync's `V` (storesync.vouch)
            self._v = v
        elif recs:
            v.held = held or self._held(st, recs)
        recs.sort(key=bid.ingest_key)
        for c in recs:
            why = v.take(c)
            if why is None:
                out.append(c)
                if c[:3] == '.b ':
                    self._took.append(c)
            elif self._newer and why[:7] == 'replay:' and bid.rec_id(c) in self._newer:
                pass    # an older version (it verified) of a slot the store holds newer: nothing new
            else:
                self._refuse(st, c, why, src, refused)
                ref += 1
        # twice at most: the lines as they came, then the canonical text of
        # those no batch covered where it differs (_sort); the uncovered
        # lines are looked up in the batches the store holds BUF_MAX at a time
        late = False
        while wait:
            rest = []
            for c in wait:
                if v.segs and v.check(c) is None:   # (no seal of its own: no digest)
                    out.append(c)
                else:
                    rest.append(c)
            wait = []
            ok = []
            for i in range(0, len(rest), BUF_MAX):
                ok.extend(_held_cover(st, rest[i:i + BUF_MAX], self._held_segs(st) if keep else None))
            for i in range(len(rest)):
                if ok[i]:
                    out.append(rest[i])
                elif not late:
                    # as it came it is no line the owner sealed: its parse decides
                    if had is None:
                        had = list(sys.modules)
                    ref += self._sort(st, rest[i], recs, wait, dev, out, src, refused, rest[i])
                else:
                    self._refuse(st, rest[i], 'not signed: no verified batch covers this line',
                                 src, refused)
                    ref += 1
            rest = ok = None
            late = True
        had = _parsed(had)   # (a list only where a line no held seal covers was parsed: a forged one)
        if dev:
            ref += self._hosts_known(st, dev, out, src, refused)
        for c in out:
            if c.startswith('.t '):    # (a slice is a new string: ~0.2 ms a line in a Pico's sync)
                try:
                    t = int(c[3:])
                except ValueError:
                    continue
                if self._t is None or t > self._t:
                    self._t = t
        return out, ref

    def key_ids(self):
        # the trusted keys parsed once a boot, for the V and the P (~10 M instructions on a Pico)
        if self._kd is None:
            from sporadic.core import batch
            self._kd = batch.key_ids(self.keys)
        return self._kd

    def _held_segs(self, st):
        # The digests of the seal records the store holds (seals.held), kept across one sync's deliveries on a
        # roomy heap (a Pico's: each P read them from jobs.txt and in.txt again, ~5 M instructions) until the
        # store compacts (a replaced slot may go); a delivery's are added as it commits. None: read in pieces.
        c = self._segs
        if c is not None and c[0] == st.compactions:
            return c[1]
        self._segs = None
        import gc
        gc.collect()    # (what is free, not the request's garbage: the P's seals read at every P)
        if not hasattr(gc, 'mem_free') or gc.mem_free() < SEGS_FREE:
            return None
        from sporadic.device import seals
        c = (st.compactions, seals.kept(st))
        self._segs = c
        return c[1]

    def _sort(self, st, raw, recs, wait, dev, out, src, refused, same):
        # one line parsed (its canonical text) into the list its kind goes to; the number refused (0 or 1).
        # `same`: a fleet line no batch covered as it came: refused as not signed when its canonical text
        # is that same text (it was looked up already)
        try:
            # (a seal record is its own text: no parser loaded for it, docs/budgets.md#31)
            c = raw if own_text(raw) else _jl().canonical(raw)
        except MemoryError:
            raise                 # not the line's fault: nothing is quarantined
        except Exception as e:
            self._refuse(st, raw, str(e), src, refused)
            return 1
        if c is None:
            return 0
        k = c[:3]
        if k == '.b ' or k == '.k ':
            recs.append(c)
        elif bid.needs_batch(c):
            if c == same:
                self._refuse(st, c, 'not signed: no verified batch covers this line', src, refused)
                return 1
            wait.append(c)
        elif c[ID_LEN:ID_LEN + 3] in (' r ', ' a ') and _mac(c) == '-':
            self._refuse(st, c, 'no MAC: a device record must be authenticated', src, refused)
            return 1
        elif self.secret and c[ID_LEN:ID_LEN + 3] == ' r ' and not self._mine_ok(c):
            # a result naming this board that this board did not write
            self._refuse(st, c, 'bad MAC: a result of %s that %s did not write' % (self.me, self.me),
                         src, refused)
            return 1
        elif c[ID_LEN:ID_LEN + 3] in (' r ', ' a '):
            dev.append(c)
        else:
            out.append(c)
        return 0

    def _hosts_known(self, st, dev, out, src, refused):
        # A device record counts only for a host of the fleet: one whose
        # signed `.h` record the store holds or this delivery brought
        # (verified above). A result or assignment naming any other id (a
        # ghost, a made-up `Z`) is quarantined: nothing could check its MAC,
        # and kept it would settle a single-run job for everyone it reaches
        # (issue #29 case 1). Moves the known ones to out; returns the number refused.
        from sporadic.core.order import board_keyed, board_signed, host_of
        hosts = self._hosts
        keys = self._hkeys
        if hosts is None:
            # read once a boot: `.h` records are never dropped, and the
            # deliveries' own are added below (a P of a large sync is one of many)
            hosts = [self.me] if self.me else []
            keys = {}
            for line in st.stream():
                if line[0] != '.' or line[:3] > '.h ':
                    break
                if line[:3] == '.h ':
                    hosts.append(host_of(line))
                    if board_keyed(line):
                        _hkey(keys, line)
            self._hosts = hosts
            self._hkeys = keys
        for c in out:
            if c[:3] == '.h ':
                h = host_of(c)
                if h not in hosts:
                    hosts.append(h)
                if board_keyed(c):
                    _hkey(keys, c)
        n = 0
        sig = []     # records of other hosts that have a board key: checked below
        for c in dev:
            f = c.split(' ', 6)
            bad = f[2] if f[2] not in hosts else f[5] if f[1] == 'a' and f[5] not in hosts else None
            if bad is not None:
                self._refuse(st, c, 'unknown host %s: not in the fleet\'s signed host list' % bad,
                             src, refused)
                n += 1
            elif keys and not (f[1] == 'r' and f[2] == self.me) and (
                    (f[5] if f[1] == 'a' else f[2]) in keys or board_signed(f[6])):
                sig.append(c)
            else:
                out.append(c)
        if sig:
            import sporadic
            sporadic.forget('sporadic.core.hostrec')   # the keys are read: its room for the check's code
            from sporadic.device import boardsig   # board signatures: loaded for these only
            n += boardsig.check(self, st, sig, keys, out, src, refused)
        return n

    def _mine_ok(self, c):
        # False for a result naming this board whose MAC is not this board's
        if c.split(' ', 3)[2] != self.me:
            return True
        from sporadic.core import hmac
        return hmac.check_line(self.secret, c)

    _newer = None    # ids of this delivery's slot records the store holds a later version of

    def _held(self, st, recs):
        # SEQs of this delivery's .b/.k records the store already holds
        # (it may hold them at or below the hwm: they were accepted before),
        # and (self._newer) those of its slot records below the hwm whose
        # slot the store holds at a later SEQ: a peer relaying a seal it
        # has not yet seen replaced, dropped without a refusal
        want = []
        slots = []
        for c in recs:
            i = bid.rec_id(c)
            q = bid.rec_seq(c)
            if i and 0 <= q <= self.hwm:
                want.append(i)
                if bid.slot_of(c):
                    slots.append(i)
        held = []
        newer = []
        if want:
            for line in st.stream():
                if line[0] != '.':
                    break
                i = bid.rec_id(line)
                if i in want:
                    held.append(bid.rec_seq(line))
                elif i and i[3:4] == '@':
                    for c in slots:
                        if c[:bid.SLOT_AT] == i[:bid.SLOT_AT] and c < i:
                            newer.append(c)
        self._newer = newer
        return held

    def commit(self, st=None):
        """After the accepted lines are durable: persist the new state (hwm,
        keys) atomically, then apply the newest signed time."""
        v = self._v
        if self._vc is None:
            self._v = None   # (else kept for the session's next delivery: admit)
        if self._took:
            # this delivery's seals are in in.txt now: held for the next one
            if self._segs is not None and st is not None and self._segs[0] == st.compactions:
                from sporadic.device import seals   # (loaded: it made _segs)
                for c in self._took:
                    seals.keep(self._segs[1], bid.held_digests(c))
            self._took = []
        if v is not None:
            if v.hwm != self.hwm or v.rotated or v.retired != self.retired:
                self.hwm = v.hwm
                if v.rotated:
                    self.keys = v.keytexts()
                    self._kd = None
                    v.rotated = False
                self.retired = v.retired
                self.save()
        t = self._t
        self._t = None
        if t is not None:
            self._time(st, t)

    def save(self):
        with open(self.tmp, 'w') as f:
            json.dump({'hwm': self.hwm, 'keys': self.keys, 'retired': self.retired,
                       'cfg_key': self.cfg_key}, f)
        # relative paths: os.rename with two absolute paths fails on a VfsPosix mounted at / (unix port)
        a = self.tmp
        b = self.path
        if a[0] == '/':
            a = a[1:]
            b = b[1:]
        os.rename(a, b)

    def _time(self, st, t):
        # a signed time record: sets an unknown clock, moves a trusted one forward; one behind a
        # trusted clock by more than BACK_MAX is refused and reported (stale, replayed, pushed back)
        from sporadic.device import clock
        if clock.state == 'unknown' and clock.source == '':
            clock.init()
        now = clock.now()
        if now is None or t > now:
            from sporadic.device import clockset
            try:
                clockset.set(t, 'signed')
            except ValueError as e:
                self.clock_note = str(e)
            return
        if t < now - BACK_MAX:
            why = 'time refused: .t %d is %d s behind the clock (bound %d s)' % (t, now - t, BACK_MAX)
            self.clock_note = why
            if st is not None:
                st.quarantine('.t %d' % t, why, 'clock')
            self.refused += 1

    def info(self):
        d = {'mode': 'signed', 'hwm': self.hwm, 'keys': [k[:12] for k in self.keys],
             'refused': self.refused, 'refusals': last_reasons(self.quar[:-8])}
        if self.clock_note:
            d['clock_refused'] = self.clock_note
        return d


def _parsed(had):
    # The parser's rarely used code this delivery loaded (job text, cron, zone, sun, host record modules)
    # goes on a tight heap (store.tight): a 128K unix board holds the sync's code and one of the two,
    # not both (docs/budgets.md#27); after a late parse, before the compaction (#31)
    if had is None or not store.tight():
        return       # (nothing parsed;) a roomy heap keeps them: no import again at the next delivery
    if 'sporadic.core.jobline' in had and 'sporadic.core.jobtext' not in had:
        _jl().unload()
    import sporadic
    sporadic.forget_since(had)


def _jl():
    from sporadic.core import jobline   # (loaded for a line that needs it)
    return jobline


def _hkey(keys, line):
    # a host record's board key into keys (in order: a later record of a host holds)
    from sporadic.core import hostrec
    k = hostrec.pubkey(line)
    if k is not None:
        from sporadic.core.order import host_of
        keys[host_of(line)] = k


def _mac(c):
    # the MAC field of a canonical result (ID r HOST K AT OUTCOME MAC ...) or
    # assignment (ID a HOST K AT BY MAC)
    f = c.split(' ', 7)
    return f[6] if len(f) > 6 else '-'


def _held_cover(st, lines, segs=None):
    # [bool]: which lines a .b record held in the store covers (seals.cover).
    # Read from the file (no kept digests) on a tight heap, seals.py goes
    # after it: the compaction after the delivery wants its room (a 96K
    # board found no 640-byte run for fold's names, tests/test_scale_sync.py)
    from sporadic.device import seals
    try:
        return seals.cover(st, lines, segs)
    finally:
        if segs is None and store.tight():
            import sporadic
            sporadic.forget('sporadic.device.seals')


def last_reasons(root='', n=REASONS):
    """The last n quarantine entries (src: reason: line), newest last, from
    the tail of quar.txt (survives a reboot; no RAM kept for it)."""
    try:
        f = open(root + 'quar.txt')
    except OSError:
        return []
    try:
        try:
            sz = os.stat(root + 'quar.txt')[6]
            if sz > 1024:
                f.seek(sz - 1024)
                f.readline()
        except Exception:
            pass
        last = []
        while True:
            line = f.readline()
            if not line:
                break
            last.append(line.rstrip('\n')[:120])
            if len(last) > n:
                last.pop(0)
        return last
    finally:
        f.close()
