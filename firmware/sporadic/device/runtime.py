# The device loop: load the config, check the clock, stream the job file
# once a wake (constant memory), ask the planner what to do about each job,
# record, act, and sleep until the next thing to do.
from micropython import const
import gc
import board
import sporadic
from sporadic.device import clock, store
from sporadic.core import jobline, plan

# sporadic.device.actions and sporadic.core.groups/hmac: imported when a pass
# needs them (_act, step, _record) and, on a small heap, let go after it
# (_drop_pass_code), so that the wake index's work after the pass has their room
actions = None

MAX_SLEEP = const(3600)       # never sleep longer than this (s): syncs, jumps
_UNKNOWN_SLEEP = const(60)     # clock unknown: look again after this (s)
HOSTS_MAX = const(128)        # host records held in RAM; beyond, ranks stream
_LAST_KEPT = const(5)
_JUMP_BACK = const(300)
KEEP_INDEX_CODE = const(196608)   # this much free at import: wake/agenda stay loaded (_drop_index_code)
# The wake index lists the earliest decisions to come with their jobs' offsets
# (wake.py): as many as its home holds. 8 in an ESP8266's 492 bytes of RTC
# memory (the unix board's file stands for those), 32 in 2 KiB of RTC memory
# (ESP32) or in a file (RP2040: about 1.2 KB), so that a file with several
# jobs due an hour gets hours of due wakes from one full pass.
AGENDA_SMALL = const(8)
AGENDA_LARGE = const(32)
AGENDA = AGENDA_SMALL if 0 < getattr(board, 'RTC_MEM', 492) < 2048 else AGENDA_LARGE

_rt = None


class Runtime:
    _due = None       # the jobs a wake decides alone, as wake.plan found them
    _outcome = None   # an action's outcome not yet in the log (_settle)

    def __init__(self, root='', cfg=None):
        # the set-up of a boot (device/rtinit.py: the config, the id, the
        # store opened, the clock read), its code in RAM for it only
        from sporadic.device import rtinit
        rtinit.init(self, root, cfg)
        rtinit = None
        sporadic.forget('sporadic.device.rtinit')
        sporadic.forget('sporadic.device.cfgfile')
        gc.collect()
        _act().user()   # compile /actions.py now, while the heap is least fragmented (it stays)
        _drop_pass_code()

    # ---- recording ----

    def _record(self, jid, k, at, outcome, attempt, text='', single=False):
        r = jobline.Result(jid, self.id, k, at, outcome, attempt if attempt > 1 else 1, '-', text)
        line = r.line()
        if self.mac:   # one HMAC a record; the companion checks it
            from sporadic.core import hmac
            r.mac = hmac.mac_result(self.cfg['secret'], line)
            if single and self.cfg.get('sign'):
                # a single-run record: the board's signature too, which its
                # peers check (core/recsig.py; `each` results stay HMAC alone)
                gc.collect()   # its code and big ints, in the pass's fragmented heap
                try:
                    from sporadic.core import recsig
                    r.mac = recsig.sign(self.cfg['sign'], self.cfg['sign_pub'], line, r.mac)
                except MemoryError:
                    # a heap too small to sign: the record with its HMAC alone,
                    # never none (at most once); peers do not count it
                    # (docs/security.md#board-signatures)
                    self.error = 'no heap to sign %s.%d' % (jid, k)
                recsig = None
                sporadic.forget('sporadic.core.recsig')
                sporadic.forget('sporadic.core.ed25519')
            line = r.line()
        self.store.append(line)
        self.last.append(line)
        if len(self.last) > _LAST_KEPT:
            self.last.pop(0)
        return r

    # ---- one job ----

    def _job(self, job, mine, done_k, hosts, now):
        rnk = None
        heard = None
        if job.kind == 'one':
            if hosts is not None:
                rnk = plan.rank(job.id, self.id, hosts)
            else:   # too many hosts to hold, or a due pass: the .h records streamed
                from sporadic.device import hostscan
                rnk = plan.rank(job.id, self.id, hostscan.hosts(self.store))
        elif job.roll is not None:   # a staged rollout: this board's wave, what it heard
            from sporadic.core import rollout
            if hosts is None:
                from sporadic.device import hostscan
                hosts = hostscan.hosts(self.store)
            rnk = rollout.wave(job, self.id, hosts)
            heard = self._tally
        at_next = None
        one = job.kind in ('one', 'any')   # its records are signed (_record)
        for _ in range(plan.DECIDE_MAX):
            act, k, at, att = plan.decide(job, self.id, now, mine, done_k, rnk, self.rnd,
                                          self._asg, self._lease is not None and self._lease(), heard)
            if act == plan.WAIT:
                at_next = at
                self.pending += 1
                break
            if act == plan.IDLE:
                break
            if act == plan.MISS:
                self._record(job.id, k, now, 'miss', 1, plan.miss_reason(
                    job, k, clock.set_at, self.unknown_since_boot, clock.jumps, rnk, heard), one)
                mine = (k, 'miss', 1)
            elif act == plan.ABORT:   # a miss saying what this board heard of earlier waves
                self._record(job.id, k, now, 'miss', 1, job.roll.abort_text(heard[1], heard[2]), one)
                mine = (k, 'miss', 1)
            elif act == plan.FAIL:
                self._record(job.id, k, now, 'err', att, 'interrupted', one)
                mine = (k, 'err', att)
            else:  # RUN: record the start first (at most once across a crash:
                # run.txt, the `run` record if the board is cut before the outcome)
                if self._outcome is not None:   # no action starts before the last one's outcome is written
                    at_next = now + _UNKNOWN_SLEEP
                    break
                self.store.started(job.id, k, now, att, '' if self.id == self.cfg.get('id') else self.id, one)
                act = _act()
                act.context = job.id + '.' + str(k)
                ok, text = act.run(job.action(), job.args())
                act.context = ''
                if text is act.RESET:
                    self.reset_wanted = True
                    text = 'reset'
                out = 'ok' if ok else 'err'
                self._outcome = (job.id, k, now, out, att, text, one)
                self._settle()
                mine = (k, out, att)
        else:
            at_next = now   # DECIDE_MAX: more to decide at the next pass (no idle wake before)
        return at_next

    def _settle(self):
        # the last action's outcome into the log, then run.txt goes. One that
        # cannot be written (a full flash, no heap for its MAC) stays here,
        # run.txt with it: each pass tries again first, and no action starts
        # before it is written; a restart makes it the `run` record
        # (recover.py). Never the same instance run twice in one boot.
        o = self._outcome
        if o is not None:
            self._record(o[0], o[1], o[2], o[3], o[4], o[5], o[6])
            self._outcome = None
            self.store.ended()

    # ---- one pass ----

    def step(self, now, lease=None):
        """One pass over the job file at Unix time `now` (None: clock
        unknown, nothing dated runs). `lease`: on a network, the node's
        check (net/node.py Node.led): lease() -> True while a section leader
        holds the lease (any/one then wait for its assignment). Returns the
        next wake (Unix time), or None when the clock is unknown. A flash
        that fails a write (full: ENOSPC) never ends the loop: the status
        says so and the pass is tried again a minute later."""
        try:
            return self._pass(now, lease)
        except OSError as e:
            self.error = 'pass: ' + _why(e)
            self.next_wake = None if now is None else now + _UNKNOWN_SLEEP
            return self.next_wake

    def _pass(self, now, lease):
        self.steps += 1
        self._lease = lease
        jobline.unload()   # jobx/timex, if a rare path loaded them (docs/device.md#memory)
        gc.collect()
        if now is None:
            self.next_wake = None
            return None
        if self._outcome is not None:
            self._settle()
        if self.last_now is not None and now < self.last_now - _JUMP_BACK:
            clock.note_jump(now, now - self.last_now, 'observed')
        self.last_now = now
        led = lease is not None and lease()
        due = self._index(now, led, False) if store.WAKE_INDEX else None
        if due is True:
            return self.next_wake
        # the pass's code, loaded while the heap is emptiest (_drop_pass_code lets it go)
        _act()
        if self.mac:
            from sporadic.core import hmac
        from sporadic.core import groups
        if self.store.unverified:   # the open took jobs.txt's stamp on the index's word
            from sporadic.device import stamp
            stamp.verify(self.store)
        self.bad_jobs = 0   # _visit counts them, jobs and pending up, and notes each WAIT
        if due is None:   # a full pass (else the due jobs' groups alone: wake.save ends that pass)
            self.jobs = 0
            self.pending = 0
            self._agenda = []     # the AGENDA earliest [due, jid, offset] (_note)
            self._limit = None    # no job outside _agenda is due before it (None: never)
            due = self.store.stream()
        groups.scan(due, self.id, HOSTS_MAX, self._visit, self._tally, cap=self._cap)
        groups = hmac = None
        due = self._agenda
        self.next_wake = due[0][0] if due else self._limit   # the earliest WAIT
        due = None
        self._asg = None
        _drop_pass_code()   # the compaction's code (fold.py) gets the pass code's room
        if self.store.needs_compaction():
            # the compaction, the agenda kept across it (agenda.py, loaded
            # again by _index after it)
            from sporadic.device import agenda
            agenda.compact(self)
            agenda = None
        self.store.release()
        _drop_pass_code()
        if store.WAKE_INDEX:
            gc.collect()
            self._index(now, led, True)
        if self._outcome is not None:   # an outcome to write: again a minute from now
            self.next_wake = now + _UNKNOWN_SLEEP
        if self.next_wake is None or self.next_wake > now + MAX_SLEEP:
            self.next_wake = now + MAX_SLEEP
        if self.reset_wanted:
            self.reset_wanted = False
            board.reset()
        return self.next_wake

    def _index(self, now, led, after):
        # the wake index (wake.py, agenda.py), each module loaded for its
        # part and dropped again on a small heap: never in RAM during a
        # pass, nor both at once. Before a pass: the plan (True: nothing due; a stream of the
        # due jobs' groups; None: a full pass); after one: its record
        due = None
        if after:
            if self._agenda is not None:   # None: a compaction dropped it, the index is cleared
                from sporadic.device import agenda
                agenda.finish(self)
        else:
            from sporadic.device import wake
            due = wake.read(self.store, self.cfg.get('secret'))
        agenda = wake = None
        _drop_index_code()
        if after:
            from sporadic.device import wake
            try:
                wake.save(self.store, self.cfg.get('secret'), self, now, led)
            except MemoryError:   # no room for the agenda's text: no index, the next wake's full pass
                self._agenda = None
                gc.collect()
                wake.save(self.store, self.cfg.get('secret'), None, now, led)
            self._agenda = None   # recorded: not held between passes (a sync wants the room)
        elif due is not None:
            try:
                from sporadic.device import agenda
                due = agenda.plan(self, due, now, led, MAX_SLEEP)
            except MemoryError:   # a fragmented heap: the full pass, as without the index
                due = self._due = None
        agenda = wake = None
        _drop_index_code()
        if due is not True:
            gc.collect()   # their code goes before the pass (or a sync's status) asks for room
        return due

    def _note(self, w, jid):
        # a job's next decision at w: the agenda keeps the AGENDA earliest,
        # sorted; _limit bounds all the others from below
        if self._limit is not None and w >= self._limit:
            return
        a = self._agenda
        i = len(a)
        while i and a[i - 1][0] > w:
            i -= 1
        a.insert(i, [w, jid, None])
        if len(a) > AGENDA:
            self._limit = a.pop()[0]

    def _parse(self, jtext):
        # a job line parsed; a calendar job placed at this board's position
        # (cfg lat/lon: deploy --lat --lon), its module loaded by the parse
        job = jobline.parse(jtext)
        if job.cal is not None:
            from sporadic.core import calendar
            job.cal.place(calendar.position_of(self.cfg))
        return job

    def _cap(self, jtext):
        # groups.scan's cap: the newest instance of this single-run job due
        # now; the job parsed here is the one _visit decides (parsed once)
        try:
            job = self._parse(jtext)
        except Exception:   # _visit parses it again and says why
            return 1 << 62
        self._pj = (jtext, job)
        return plan.newest(job, self.last_now)

    def _visit(self, jid, jtext, cancelled, mine, done_k, asg, hosts):
        # one job at the end of its group (groups.scan): counted, decided, its wake taken
        if jtext is None or cancelled:
            return
        if self._due is not None:
            hosts = None   # wake.plan read no '.h' record: hostscan.py streams them
        self._asg = asg
        now = self.last_now   # this pass's time (step)
        self.jobs += 1
        if self.store.log_size > store.PASS_LOG_MAX:
            self.pending += 1
            self._note(now, jid)   # decided at the next pass (due now in the agenda, or past LIMIT)
            return
        pj = self._pj
        self._pj = None
        try:
            job = pj[1] if pj is not None and pj[0] is jtext else self._parse(jtext)
        except MemoryError:
            # not the line's fault: never quarantine a good job for it; a
            # pass a minute from now tries again (without this wake the loop
            # slept MAX_SLEEP and a 10-minute job's instances went unrun and
            # unrecorded: tests/test_runtime.py test_status_and_outbox_ack)
            self.error = jtext[:jobline.ID_LEN] + ': out of memory'
            self.bad_jobs += 1
            try:
                self._note(now + _UNKNOWN_SLEEP, jid)
            except MemoryError:
                self._limit = now   # no room even for that: the next pass at once
            return
        except Exception as e:
            self.store.quarantine(jtext, 'job line: ' + str(e), 'jobs.txt')
            self.bad_jobs += 1
            return
        try:
            w = self._job(job, mine, done_k, hosts, now)
        except SystemExit:
            raise
        except Exception as e:  # a planner/record failure: never stop the loop
            self.error = jtext[:jobline.ID_LEN] + ': ' + _why(e)
            self.bad_jobs += 1
            return
        if w is not None:
            self._note(w, jid)



def _why(e):
    # an error as the status says it (one line)
    if isinstance(e, OSError) and e.args and e.args[0] == 28:   # ENOSPC
        return 'the flash is full'
    return '%s: %s' % (type(e).__name__, e)


def get():
    """The runtime of this boot (made on first use)."""
    global _rt
    if _rt is None:
        _rt = Runtime()
    return _rt


def step(now=None):
    """One pass at `now` (default: the clock; None when unknown)."""
    if now is None:
        now = clock.now()
    return get().step(now)


def main(until=None, max_steps=None):
    """The loop: run what is due, sleep until the next wake. `until` (Unix
    time) and `max_steps` end it (tests, the simulator); a board never
    returns from here."""
    rt = get()
    n = 0
    while True:
        now = clock.now()
        if until is not None and now is not None and now >= until:
            return rt
        if max_steps is not None and n >= max_steps:
            return rt
        n += 1
        nxt = rt.step(now)
        board.wdt_feed()
        if nxt is None:
            ms = _UNKNOWN_SLEEP * 1000
        else:
            cur = clock.now()
            if until is not None and nxt > until:
                nxt = until
            ms = (nxt - cur) * 1000 if cur is not None else 1000
            if ms < 1000:
                ms = 1000
        board.sleep_ms(ms)


# On a small heap (an ESP8266's 38K) the index's code leaves RAM after each
# use. A big one (a Pico's 240K) keeps it: importing it again from the flash
# was 64% of an idle wake on the rp2 firmware (bench/wake.py --rp2). Asked
# once, as the room free when the loop loads: gc.mem_free() walks the whole
# heap (0.75 M instructions on a Pico).
_drop_index = gc.mem_free() < KEEP_INDEX_CODE


def _drop_index_code():
    if _drop_index:
        sporadic.forget('sporadic.device.agenda')
        sporadic.forget('sporadic.device.wake')
        sporadic.forget('sporadic.core.hmac')   # the index's MAC (wake.py)


def _act():
    # sporadic.device.actions, loaded on first use (a pass that runs a job)
    global actions
    if actions is None:
        from sporadic.device import actions as a
        actions = a
    return actions


def _drop_pass_code():
    # on a small heap, the code only a pass uses leaves RAM once it is done:
    # the actions (the user's /actions.py stays imported, its state with it),
    # the group scanner, the MAC (wake.save loads it again if it signs), the
    # compaction (device/fold.py, core/merge.py)
    global actions
    if _drop_index:
        actions = None
        sporadic.forget('sporadic.device.actions')
        sporadic.forget('sporadic.core.groups')
        sporadic.forget('sporadic.core.hmac')
        sporadic.forget('sporadic.device.fold')
        sporadic.forget('sporadic.core.merge')   # the compaction's rules (fold.py loads them)
        sporadic.forget('sporadic.device.hostscan')
