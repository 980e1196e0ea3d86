"""The fleet folder: plain text that git can hold.

    FLEET/fleet.json          name, mode (signed | insecure)
    FLEET/jobs.txt            the merged job-line file (canonical, sorted, compacted)
    FLEET/results.txt         every result ever received (sorted, never compacted),
                              and the line of each any/one job among them
    FLEET/quar.txt            what boards brought that the fleet refused (a result or
                              assignment whose MAC does not verify, a line nobody
                              signed): `SOURCE: REASON: LINE`, never merged, never sent
    FLEET/devices/ID.json     what the companion knows of a board: port, board,
                              last sync, clock drift, counters; ID.set its lines'
                              digests at that sync (a cache, git-ignored: prior.py)
    FLEET/keys/               the fleet key pair (keys.py), keys/peer (the fleet
                              key boards authenticate each other with),
                              keys/devices/ID (each board's own secret)

jobs.txt merges with `companion merge` (a git merge driver, see docs/git.md);
results.txt with git's built-in `union` driver. Every write is atomic.

Beside it in companion/fleet/: board_keys.py (the keys this folder holds:
device_secret, read_fleet_key, verify_result), jobs_file.py (add_jobs,
cancel_jobs: the record operations every verb and the demo share),
actions.py (the actions the fleet's boards run), host_list.py (the host
records, add_host).
"""
import json
import os
import time

from sporadic.core import jobline
from sporadic.desktop import merging
from companion.errors import UserError
from companion.fleet.atomic import atomic_write
from companion.fleet.board_keys import device_secret, make_fleet_key, read_fleet_key, secret_or_none, verify_result
from companion.fleet import board_keys
from companion.fleet.host_list import host_positions, host_records
from companion.fleet.zonerule import zone_rule

JOBS = 'jobs.txt'
RESULTS = 'results.txt'
QUAR = 'quar.txt'
SET = '.set'    # devices/ID.set: what a board held at its last equal sync (companion/sync/prior.py), a cache




# {path: (stat key, lines)}: a file checked once per version per process
_checked = {}


def _stat_key(st):
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _lines(path, limit=True):
    """The lines of a fleet file, each checked (merging.line_problem, then
    the parser): [] for no file; a bad file is a UserError naming the file,
    the line and what to do, before anything acts on it. limit: refuse a
    file over mergefiles.FILE_MAX (jobs.txt; results.txt keeps every result
    ever received, so it has none)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return []
    key = _stat_key(st)
    hit = _checked.get(path)
    if hit is not None and hit[0] == key:
        return list(hit[1])
    name = os.path.relpath(path)
    if name.startswith('..'):
        name = path
    from companion.fleet.mergefiles import read_lines
    lines = read_lines(path, name=name, limit=limit)
    for n, raw in enumerate(lines, 1):
        why = line_fault(raw)
        if why is not None:
            raise UserError('%s:%d: %s; fix or remove the line (`companion check %s` lists every bad line), '
                            'or restore the file from git' % (name, n, why, name))
    _checked[path] = (key, tuple(lines))
    return lines


def line_fault(raw):
    """Why a line may not stand in a fleet file as it is (bad, or not the
    canonical text the companion writes), or None (also for a comment or
    a blank line)."""
    if merging.fast_match is not None and merging.fast_match(raw) is not None:
        return None
    line, why = merging.parsed(raw, zone_rule)
    if why is None and line is not None and line != raw:
        why = 'not in canonical form (%s)' % line[:60]
    return why


_DEVICE_FIX = 'remove it: the next sync with the board writes it again'


def _json(path, fix):
    """A JSON object file of the folder; a damaged one is a UserError saying
    what to do (fix). FileNotFoundError passes."""
    try:
        with open(path, 'rb') as f:
            data = json.loads(f.read().decode('utf-8'))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise UserError('%s is not readable JSON (%s): %s' % (path, one_line_of(e), fix)) from None
    if not isinstance(data, dict):
        raise UserError('%s is not a JSON object: %s' % (path, fix))
    return data


def one_line_of(e):
    return ' '.join(str(getattr(e, 'strerror', None) or e).split())[:80]


class Fleet:
    def __init__(self, folder):
        self.dir = os.path.abspath(folder)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    # -- life cycle -----------------------------------------------------------

    def exists(self):
        return os.path.isfile(self.path('fleet.json'))

    def require(self):
        if not self.exists():
            raise UserError('%s is not a fleet folder: run `companion init` there, or pass --fleet DIR'
                            % self.dir)
        return self

    def init(self, name=None, insecure=False):
        if self.exists():
            raise UserError('%s is already a fleet folder' % self.dir)
        os.makedirs(self.path('devices'), exist_ok=True)
        meta = {'name': name or os.path.basename(self.dir), 'mode': 'insecure' if insecure else 'signed',
                'created': int(time.time())}
        pub = None
        if not insecure:
            from companion.fleet import keys
            pub = keys.init_keys(self.dir)
        make_fleet_key(self)    # keys/peer: board-to-board authentication
        atomic_write(self.path('fleet.json'), json.dumps(meta, indent=1) + '\n')
        self._meta = meta
        for f in (JOBS, RESULTS):
            if not os.path.exists(self.path(f)):
                atomic_write(self.path(f), '')
        atomic_write(self.path('.gitattributes'),
                'jobs.txt merge=sporadic\nresults.txt merge=union\n')
        atomic_write(self.path('.gitignore'), 'devices/*%s\n' % SET)
        return meta, pub

    @property
    def meta(self):
        # read once per Fleet object (a sync asks for every line it verifies)
        m = self.__dict__.get('_meta')
        if m is None:
            m = self._meta = _json(self.path('fleet.json'), 'restore it from git or a backup')
            if m.get('mode', 'signed') not in ('signed', 'insecure'):
                raise UserError('%s does not say the fleet\'s mode ("mode": "signed" or "insecure"): '
                                'restore it from git or a backup' % self.path('fleet.json'))
        return m

    @property
    def insecure(self):
        return self.meta.get('mode') == 'insecure'

    # -- the job-line file ------------------------------------------------------

    def lines(self):
        return _lines(self.path(JOBS))

    def check_files(self):
        """Read (and so check) jobs.txt and results.txt: a verb that changes
        the folder or a board calls this first, so a bad file stops it before
        anything changed (a UserError naming the file, the line, what to do)."""
        self.lines()
        _lines(self.path(RESULTS), False)
        d = self.path('keys', 'devices')
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else ():
            if not name.startswith('.') and not name.endswith('.tmp'):
                device_secret(self, name)     # each board's secret: hex (a sync checks MACs of several)
        read_fleet_key(self)
        return self

    def write_lines(self, lines):
        lines = list(lines)
        path = self.path(JOBS)
        atomic_write(path, ''.join(l + '\n' for l in lines))
        _checked[path] = (_stat_key(os.stat(path)), tuple(lines))

    def merge_in(self, new_lines, name='incoming', errors=None, conflicts=None):
        """Merge lines into jobs.txt; returns the lines that were new. In a
        signed fleet a job text a verified batch covers beats one none
        covers under the same id (rule 4, core/rivals.py)."""
        before = set(self.lines())
        new_lines = list(new_lines)
        signed = self.signed_test(before, new_lines)
        out = merging.merge((JOBS, before), (name, new_lines), errors=errors, conflicts=conflicts,
                            signed=signed, zone_rule=zone_rule)
        self.write_lines(out)
        return [l for l in out if l not in before]

    def receive(self, new_lines, name='incoming', errors=None, conflicts=None, source=None):
        """Merge what a board (or a peer) sent; returns [(line, reason)]
        refused. In a signed fleet, a fleet-authored line (a job, a cancel,
        `.h`, `.t`) the fleet does not hold must be covered by a batch whose
        signature verifies under one of the fleet's keys: a board that was
        tampered with cannot put a job into the fleet (where a key rotation
        would sign it), only carry lines the owner signed. A result or
        assignment must carry the MAC of the board it names (`_unverified`);
        a .b/.k record must verify (`_bad_records`).
        What is refused is quarantined (FLEET/quar.txt, under `source`, else
        `name`), never merged."""
        refused = [] if self.insecure else (self._unsigned(new_lines) + self._unverified(new_lines)
                                            + self._bad_records(new_lines))
        if refused:
            bad = {l for l, _ in refused}
            new_lines = [l for l in new_lines if l not in bad]
            self.quarantine(refused, source or name)
        self.merge_in(new_lines, name, errors=errors, conflicts=conflicts)
        return refused

    def _unverified(self, new_lines):
        # device records (results, assignments) the fleet does not hold: each
        # must carry the MAC of the board it names (an assignment: of the
        # leader that wrote it). One that does not is quarantined here, never
        # merged into jobs.txt, so no sync carries it on to a board (#29)
        out = []
        held = None
        sig = None     # the host list's board keys and the single-run jobs (board_keys.Signatures)
        for l in new_lines:
            if l[8:11] not in (' r ', ' a '):
                continue
            if held is None:
                held = set(self.lines())
            if l in held:
                continue
            try:
                r = jobline.parse(l)
            except jobline.ParseError:
                continue        # the merge reports it
            res = isinstance(r, jobline.Result)
            who = r.host if res else r.by
            if verify_result(self, r) is False:
                why = 'no board %s in this fleet' % who if secret_or_none(self, who) is None \
                    else 'its MAC does not verify'
                out.append((l, 'unverified %s from %s (%s)' % ('result' if res else 'assignment', who, why)))
                continue
            if sig is None:
                sig = board_keys.Signatures(self.lines(), new_lines)
            why = sig.problem(l, who, res)
            if why:
                out.append((l, 'unverified %s from %s (%s)' % ('result' if res else 'assignment', who, why)))
        return out

    def quarantine(self, refused, source):
        """Append [(line, reason)] to FLEET/quar.txt (`SOURCE: REASON: LINE`),
        each line once: a board that holds a refused record offers it again
        at every sync (the board keeps it; only its sender could drop it)."""
        have = self.quarantined()
        new = [(l, why) for l, why in refused if not any(q.endswith(': ' + l) for q in have)]
        if not new:
            return
        with open(self.path(QUAR), 'a', encoding='utf-8', errors='surrogateescape') as f:
            for l, why in new:
                f.write('%s: %s: %s\n' % (source, why, l))
            f.flush()
            os.fsync(f.fileno())

    def quarantined(self):
        """The quarantine entries (`SOURCE: REASON: LINE`), oldest first:
        text about records, not records (read as it is, never parsed)."""
        try:
            with open(self.path(QUAR), encoding='utf-8', errors='surrogateescape') as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def _unsigned(self, new_lines):
        from sporadic.core import batch
        held = set(self.lines())
        todo = {}
        for l in new_lines:
            if l not in held and batch.needs_batch(l):
                todo[batch.line_digest(l)] = l
        if not todo:
            return []
        from companion.fleet import keys
        v = batch.Verifier(keys.trusted_pubs(self.dir), 0, window=len(todo))
        covered = set()
        records = sorted({l for l in new_lines if l[:3] == '.b '} | {l for l in held if l[:3] == '.b '})
        for rec in records:
            try:
                ds = batch.parse_batch(rec)[2]
            except ValueError:
                continue
            mine = {ds[i:i + batch.DIGEST] for i in range(0, len(ds), batch.DIGEST)} & set(todo)
            if mine - covered and v.add_batch(rec) is None:
                covered |= mine
        return [(l, 'not signed by this fleet: no verified batch covers it')
                for d, l in todo.items() if d not in covered]

    def signed_test(self, *sources):
        """line -> bool: a batch record among the sources' lines whose
        signature verifies under one of the fleet's keys covers the line;
        None in an insecure fleet (nothing is signed there)."""
        if self.insecure:
            return None
        from sporadic.core import batch
        held = []

        def test(line):
            # the batches are verified at the first question (a merge asks
            # only where an id holds two job texts)
            if not held:
                held.append(self.verified_digests(l for src in sources for l in src if l[:3] == '.b '))
            return batch.line_digest(line) in held[0]
        return test

    def verified_digests(self, records):
        """The digests (batch.line_digest) the given .b records cover, of
        those whose signature verifies under one of the fleet's keys (each
        record checked once per Fleet object)."""
        from sporadic.core import batch
        cache = self.__dict__.setdefault('_verified', {})
        out = set()
        v = None
        for rec in records:
            ds = cache.get(rec, 0)
            if ds == 0:
                if v is None:
                    from companion.fleet import keys
                    v = batch.Verifier(keys.trusted_pubs(self.dir), 0, window=1 << 30)
                try:
                    ds = batch.parse_batch(rec)[2]
                except ValueError:
                    ds = None
                if ds is not None and v.add_batch(rec) is not None:
                    ds = None
                cache[rec] = ds
            if ds:
                out.update(ds[i:i + batch.DIGEST] for i in range(0, len(ds), batch.DIGEST))
        return out

    def _bad_records(self, new_lines):
        """[(record, reason)]: the .b/.k records among new_lines the fleet
        does not hold whose signature does not verify under one of its keys.
        A batch record is kept only when it is the owner's: a later version
        of a slot replaces the one the fleet holds (merge.compact), so a
        forged one would take the proof away from the slot's lines."""
        from sporadic.core import batch, rsa
        held = None
        out = []
        pubs = None
        for l in new_lines:
            if l[:3] not in ('.b ', '.k '):
                continue
            if held is None:
                held = set(self.lines())
            if l in held:
                continue
            if pubs is None:
                from companion.fleet import keys
                pubs = {rsa.keyid(p): rsa.parse_pubkey(p) for p in keys.trusted_pubs(self.dir)}
            try:
                seq, kid, _, sig, blen = (batch.parse_batch if l[:3] == '.b ' else batch.parse_key)(l)
            except ValueError as e:
                out.append((l, 'not signed by this fleet: %s' % e))
                continue
            k = pubs.get(kid)
            if k is None or not rsa.verify(k[0], k[1], batch.body_digest(l, blen), sig):
                out.append((l, 'not signed by this fleet: %s' % ('unknown key %s' % kid if k is None
                                                                 else 'bad signature on record %08d' % seq)))
        return out

    def sign(self, lines, held=None):
        """The seal of the fleet-authored lines: slot records to merge with
        them (keys.seal: the newest slot grows, its old version goes); none
        in insecure mode. held: the fleet file's lines when the caller has them."""
        if self.insecure:
            return []
        from companion.fleet import keys
        return keys.seal(self.dir, self.lines() if held is None else held, lines)

    def hosts(self):
        return sorted(host_records(self.lines()))

    def host_positions(self):
        """{host: (lat, lon)} of the hosts whose record in the host list holds a position."""
        return host_positions(self.lines())

    def jobs(self):
        from sporadic.core.rivals import is_job
        out = []
        for l in self.lines():
            if not is_job(l):      # results, assignments, cancels, fleet records: no Job to parse
                continue
            r = jobline.parse(l)
            if isinstance(r, jobline.Job):
                out.append(r)
        return out

    def cancelled(self):
        return [l[:jobline.ID_LEN] for l in self.lines() if l.endswith(' cancel')]

    # -- results history -------------------------------------------------------

    def results(self):
        """The results history, parsed (once per version of the file per Fleet object)."""
        lines = _lines(self.path(RESULTS), False)
        hit = self.__dict__.get('_results')
        if hit is not None and hit[0] == _checked.get(self.path(RESULTS), (None,))[0]:
            return list(hit[1])
        out = []
        for l in lines:
            try:
                r = jobline.parse(l)
            except jobline.ParseError:
                continue
            if isinstance(r, jobline.Result):
                out.append(r)
        key = _checked.get(self.path(RESULTS), (None,))[0]
        if key is not None:
            self._results = (key, tuple(out))
        return out

    def add_results(self, lines):
        """Append result lines to the history (deduplicated, sorted); returns new ones.
        The history also keeps the job line of each single-run (any/one) job it
        holds results of: its duplicates stay on record once the job is
        cancelled (record_lines)."""
        have = set(_lines(self.path(RESULTS), False))
        new = []
        for l in lines:
            if l not in have and ' r ' in l[:11] and l[:1] not in ('', '#') and line_fault(l) is None:
                have.add(l)
                new.append(l)
        if new:
            ids = {l[:jobline.ID_LEN] for l in new}
            for l in self.lines():
                if l[:jobline.ID_LEN] in ids and l[jobline.ID_LEN + 1:jobline.ID_LEN + 5] in ('any ', 'any:', 'one '):
                    have.add(l)
            atomic_write(self.path(RESULTS), ''.join(l + '\n' for l in sorted(have)))
        return new

    def record_lines(self):
        """The whole record, sorted: jobs.txt (where a result stays only while
        it is its host's newest for the job) merged with the results history
        (every result received, the lines of its single-run jobs)."""
        import heapq
        # sorted again: git's union driver may have left a merged history out of order
        return heapq.merge(self.lines(), sorted(_lines(self.path(RESULTS), False)))

    # -- devices ------------------------------------------------------------------

    def _device_path(self, dev_id):
        # the id comes from the board (its T answer): a host id, so never a path
        try:
            jobline.check_host(dev_id)
        except jobline.ParseError as e:
            raise UserError('the board names itself %r: %s' % (dev_id[:40], e)) from None
        return self.path('devices', dev_id + '.json')

    def _device_file(self, path):
        """The object of a devices/ID.json, parsed once per version of the file
        per Fleet object (a fleet page reads every board's several times), as
        a new dict each time (callers update and save it). FileNotFoundError passes."""
        key = _stat_key(os.stat(path))
        cache = self.__dict__.setdefault('_device_files', {})
        hit = cache.get(path)
        if hit is None or hit[0] != key:
            hit = cache[path] = (key, _json(path, _DEVICE_FIX))
        return dict(hit[1])

    def device(self, dev_id):
        p = self._device_path(dev_id)
        try:
            return self._device_file(p)
        except FileNotFoundError:
            return None

    def devices(self):
        out = []
        d = self.path('devices')
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith('.json'):
                    out.append(self._device_file(os.path.join(d, f)))
        return out

    def save_device(self, info):
        p = self._device_path(info['id'])
        os.makedirs(self.path('devices'), exist_ok=True)
        atomic_write(p, json.dumps(info, indent=1, sort_keys=True) + '\n')
        self.__dict__.get('_device_files', {}).pop(p, None)
