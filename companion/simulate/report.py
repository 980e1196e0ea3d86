# The report: per job and type runs, duplicates, misses, delays, how long
# until every host knew; sync and file figures; the closed form for `any`.
import math
from operator import getitem

from sporadic.core import jobline, plan
from sporadic.core.timefmt import format_time


class Report:
    # -- report --

    def _window(self, job):
        """Instances whose validity window closed inside [start, end), in
        order; a calendar job's ids are the planner's (plan.next_k), not
        consecutive. A sunrise/sunset job's at the position job.cal is placed at."""
        if job.cal is None:
            if job.every:
                lo = max(0, -(-(self.start - job.within - job.t0 + 1) // job.every))
                hi = (self.end - job.within - job.t0) // job.every
            else:
                lo = 0 if job.t0 + job.within > self.start else 1
                hi = 0 if job.t0 + job.within <= self.end else -1
            return range(lo, hi + 1)
        ks = []
        k = job.cal.first(self.start - job.within)
        while k >= 0 and job.cal.when(k) + job.within <= self.end:
            ks.append(k)
            k = plan.next_k(job, k)
        return ks

    def _instances(self, job, hosts):
        """-> (the instances of the window at any of `hosts`' positions, in
        order; {k: the hosts whose window holds k} or None when it is all)."""
        if job.cal is None or not job.cal.sun():
            return self._window(job), None
        by_pos = {}
        for x in hosts:
            by_pos.setdefault(self.hosts[x].pos, []).append(x)
        cover = {}
        for pos, xs in by_pos.items():
            job.cal.place(pos)
            for k in self._window(job):
                cover.setdefault(k, []).extend(xs)
        return sorted(cover), cover

    def _due(self, job, k, x):
        """plan.due of instance k on host x (sunrise/sunset: at its position)."""
        if self.sun and job.cal is not None:
            job.cal.place(self.hosts[x].pos)
        return plan.due(job, k)

    def _cross(self, x, t1, y, t2):
        for split, heal, sec in self.parts:
            if split <= t2 and heal > t1 and sec[x] != sec[y]:
                return True
        return False

    def part(self):
        """What this run found, job by job, and the figures of its records:
        everything the report sums over jobs, kept apart so that runs of
        disjoint sets of a scenario's jobs over the same world (parallel.py)
        assemble into the report of one run of them all. Per job: its row,
        the delays and the all-knew spreads behind the type's figures, its
        first duplicates; per party: the lines and bytes its records add to
        its file at the end."""
        jobs = []
        dups_kept = 0
        for j, job in enumerate(self.jobs):
            row, delays, spread, dups = self._job_row(j, job, 1000 - dups_kept)
            dups_kept += len(dups)
            jobs.append((job.id, row, delays, spread, dups))
        live = [self.live(h) for h in range(self.P)]
        lines = [n for n, _ in live]
        sizes = [z for _, z in live]
        files = [(sum(map(getitem, lines, V)), sum(map(getitem, sizes, V))) for V in self.V]
        return {'jobs': jobs, 'files': files, 'stats': dict(self.stats)}

    def _job_row(self, j, job, dups_max):
        single = self.single[j]
        elig = [x for x in range(self.H) if plan.eligible(job, self.names[x])]
        ks, cover = self._instances(job, elig)
        n_inst = len(ks)
        delays = []
        dups = []
        runs = dup_runs = dup_inst = cross = missed = ran_inst = 0
        spread = []
        unknown = 0
        if single:
            eligible = self.H
            for k in ks:
                rs = self.inst.get((j, k))
                if not rs:
                    missed += 1
                    continue
                # runs at one instant in host order: which of two hosts the
                # loop woke first at the same time depends on when each wake
                # was planned, which other jobs' wakes decide (parallel.py)
                rs = sorted(rs)
                ran_inst += 1
                runs += len(rs)
                d = self._due(job, k, rs[0][1])
                delays.append(rs[0][0] - d)
                if len(rs) > 1:
                    dup_inst += 1
                    dup_runs += len(rs) - 1
                    t1, x1 = rs[0]
                    cr = [self._cross(x1, t1, x2, t2) for t2, x2 in rs[1:]]
                    cross += sum(cr)
                    if len(dups) < dups_max:
                        dups.append({'job': job.id, 'instance': '%s.%d' % (job.id, k),
                                     'due': format_time(d),
                                     'runs': [{'host': self.names[xx], 'at': format_time(tt)} for tt, xx in rs],
                                     'cross_section': any(cr)})
                e = self.know.get((j, k))
                if e is not None and e[1] is not None:
                    spread.append(e[1] - rs[0][0])
                else:
                    unknown += 1
        else:
            eligible = len(elig)
            expected = 0
            for k in ks:
                rs = self.inst.get((j, k), ())
                who = set()
                for tt, xx in rs:
                    if xx in who:
                        dup_runs += 1
                    else:
                        who.add(xx)
                    delays.append(tt - self._due(job, k, xx))
                runs += len(rs)
                if cover is None:
                    expected += eligible
                    missed += eligible - len(who)
                else:
                    expected += len(cover[k])
                    missed += len(cover[k]) - len(who.intersection(cover[k]))
        row = {'id': job.id, 'type': job.kind, 'line': job.text(), 'eligible_hosts': eligible,
               'instances': n_inst, 'runs': runs, 'duplicate_runs': dup_runs,
               'duplicate_instances': dup_inst, 'cross_section_duplicates': cross,
               'missed': missed, 'expected_runs': n_inst if single else expected,
               'delay': _dist(delays)}
        if job.cal is not None:   # a polar day is a miss recorded 'no sunset'
            row['miss_records'] = dict(sorted(self.why[j].items()))
        if self.wave[j] is not None:
            row['rollout'] = self._rollout_row(j, job, ks)
        if single:
            row['instances_run'] = ran_inst
            row['all_knew'] = _dist(spread)
            row['all_knew']['never'] = unknown
        return row, delays, spread, dups

    def _rollout_row(self, j, job, ks):
        """A staged rollout: per wave its hosts and how many ran, failed or
        aborted (summed over the instances of the window); `ran_failing`:
        runs of a job failing everywhere, beside the bound (rollout_bound)."""
        wv = self.wave[j]
        n = max(w for w in wv if w is not None) + 1
        waves = [{'wave': w, 'hosts': wv.count(w), 'starts_after_s': job.roll.starts(w), 'ran': 0, 'failed': 0,
                  'aborted': 0} for w in range(n)]
        for k in ks:
            for _, x in self.inst.get((j, k), ()):
                waves[wv[x]]['ran'] += 1
                waves[wv[x]]['failed'] += 1 if self.failing[j] else 0
            for _, x in self.aborts[j].get(k, ()):
                waves[wv[x]]['aborted'] += 1
        out = {'waves': waves, 'ran': sum(w['ran'] for w in waves), 'aborted': sum(w['aborted'] for w in waves),
               'failing': self.failing[j]}
        why, S = self._rollout_syncs()
        if self.failing[j] and job.roll.fail is not None:
            if why is None:
                out['bound'] = len(ks) * rollout_bound(job.roll, [w['hosts'] for w in waves], S)
                out['sync_interval_max_s'] = S
            else:
                out['bound_why_not'] = why
        return out

    def _rollout_syncs(self):
        """(why the rollout bound does not apply, or None; the longest gap
        between two syncs of a host): one companion visits every host, no
        visit fails, hosts always up without drift, no partitions."""
        if len(self.visits) != 1 or self.parts:
            return 'needs exactly one [[visit]] and no partitions', None
        v = self.visits[0]
        if v['fail'] or sorted(v['hosts']) != list(range(self.H)):
            return 'the visit fails or does not cover every host', None
        for h in self.hosts:
            if h.up.kind != 'always' or h.drift:
                return 'hosts not always up or clocks drift', None
        return None, v['interval'] + v['jitter']

    def assemble(self, parts):
        """The report of this fleet's scenario from the parts of runs over
        disjoint sets of its jobs that together hold them all (one part: one
        run). The world (syncs, their failures, clock settings) is the same
        in every run: its figures come from the first part."""
        found = {}
        for part in parts:
            for entry in part['jobs']:
                found[entry[0]] = entry
        jobs_out = []
        kinds = {}
        dup_list = []
        for job in self.jobs:
            _, row, delays, spread, dups = found[job.id]
            jobs_out.append(row)
            dup_list.extend(dups[:1000 - len(dup_list)])
            agg = kinds.setdefault(job.kind, {'jobs': 0, 'instances': 0, 'expected_runs': 0, 'runs': 0,
                                              'duplicate_runs': 0, 'duplicate_instances': 0,
                                              'cross_section_duplicates': 0, 'missed': 0, '_d': [], '_s': []})
            agg['jobs'] += 1
            for key in ('instances', 'expected_runs', 'runs', 'duplicate_runs', 'duplicate_instances',
                        'cross_section_duplicates', 'missed'):
                agg[key] += row[key]
            agg['_d'].extend(delays)
            agg['_s'].extend(spread)
        for agg in kinds.values():
            agg['delay'] = _dist(agg.pop('_d'))
            s = agg.pop('_s')
            if s:
                agg['all_knew'] = _dist(s)
        st = dict(parts[0]['stats'])
        for key in ('line_bytes', 'decisions', 'job_wakes', 'miss_records'):
            st[key] = sum(part['stats'][key] for part in parts)
        files = [(len(self.static) + sum(part['files'][x][0] for part in parts),
                  self.static_bytes + sum(part['files'][x][1] for part in parts)) for x in range(self.P)]
        hf = files[:self.H]
        nbytes = st['line_bytes'] + st['overhead_bytes']
        out = {
            'scenario': self.scn.get('name', ''),
            'seed': self.seed,
            'start': format_time(self.start), 'end': format_time(self.end),
            'hosts': self.H, 'companions': self.P - self.H,
            'jobs': jobs_out,
            'by_type': {k: kinds[k] for k in sorted(kinds)},
            'duplicates': dup_list,
            'sync': {'ok': st['syncs'], 'failed_down': st['sync_failed_down'],
                     'failed_split': st['sync_failed_split'], 'failed_random': st['sync_failed_random'],
                     'bytes': nbytes, 'overhead_per_party': self.overhead,
                     'bytes_per_sync': round(nbytes / st['syncs'], 1) if st['syncs'] else 0},
            'file_at_end': {'host_lines_mean': round(sum(f[0] for f in hf) / len(hf), 1),
                            'host_lines_max': max(f[0] for f in hf),
                            'host_bytes_mean': round(sum(f[1] for f in hf) / len(hf), 1),
                            'host_bytes_max': max(f[1] for f in hf)},
            'counts': {'sync_events': st['sync_events'], 'job_wakes': st['job_wakes'],
                       'decisions': st['decisions'], 'miss_records': st['miss_records']},
            'analytic': self.analytic(jobs_out),
        }
        if self.P > self.H:
            out['file_at_end']['companion_lines'] = files[self.H][0]
            out['file_at_end']['companion_bytes'] = files[self.H][1]
        if self.verify:
            out['counts']['verified_syncs'] = st['verified_syncs']
        return out

    # -- the analytic check for `any` --

    def _analytic_ok(self):
        """Why the closed form does not apply, or None: N always-up hosts
        without drift, one mesh over all of them (no jitter, no failures),
        nothing else syncing, no partitions."""
        if self.visits or self.contacts or self.parts:
            return 'other sync links or partitions'
        if len(self.meshes) != 1:
            return 'needs exactly one [[mesh]]'
        m = self.meshes[0]
        if m['jitter'] or m['fail']:
            return 'mesh has jitter or failures'
        if sorted(x for x in m['parties'] if x < self.H) != list(range(self.H)):
            return 'mesh does not cover every host'
        for h in self.hosts:
            if h.up.kind != 'always' or h.drift:
                return 'hosts not always up or clocks drift'
        return None

    def _rounds(self):
        m = self.meshes[0]
        return m['interval'], self._grid(self.start + m['offset'])

    def analytic(self, rows):
        out = []
        for j, job in enumerate(self.jobs):
            if job.kind != 'any':
                continue
            why = self._analytic_ok()
            row = {'job': job.id}
            if why:
                row['applies'] = False
                row['why_not'] = why
                out.append(row)
                continue
            if job.cal is not None and job.cal.sun():
                row['applies'] = False
                row['why_not'] = 'sunrise/sunset job: due times differ by position'
                out.append(row)
                continue
            S, s0 = self._rounds()
            p_run = p_dup = e_runs = 0.0
            for k in self._window(job):
                a, b, c = predict_any(self.H, job.threshold / jobline.P_ONE, job.tick, job.within,
                                      plan.due(job, k), S, s0)
                p_run += a
                p_dup += b
                e_runs += c
            r = rows[j]
            n = r['instances_run']
            pred = p_dup / p_run if p_run else 0.0
            meas = r['duplicate_instances'] / n if n else 0.0
            sigma = math.sqrt(pred * (1 - pred) / n) if n else 0.0
            row.update({'applies': True, 'hosts': self.H, 'p': job.arg, 'tick_s': job.tick,
                        'sync_s': S, 'instances': r['instances'], 'instances_run': n,
                        'predicted_p_run': rounded(p_run / max(1, r['instances'])),
                        'measured_p_run': rounded(n / max(1, r['instances'])),
                        'predicted_p_dup': rounded(pred), 'measured_p_dup': rounded(meas), 'sigma': rounded(sigma),
                        'z': rounded((meas - pred) / sigma) if sigma else 0.0,
                        'predicted_runs_per_run_instance': rounded(e_runs / p_run if p_run else 0.0),
                        'measured_runs_per_run_instance': rounded(r['runs'] / n if n else 0.0)})
            out.append(row)
        return out


def rollout_bound(roll, sizes, S):
    """The most boards that run one instance of a rollout failing on every
    board (docs/simulate.md#rollouts), when each board syncs with one
    companion at least every S seconds: the boards of wave f, the first by
    which the failed boards alone pass abort=fail>P%/N (N of them: 100% >
    P), ran by its start f x wave; each failure is at the companion within
    S of its run and on every board within S more. A board of a wave
    starting 2S or more after wave f's start has heard them all: it aborts.
    sizes: the hosts of each wave."""
    c = 0
    f = len(sizes) - 1
    for w, n in enumerate(sizes):
        c += n
        if c >= roll.least:
            f = w
            break
    return sum(n for w, n in enumerate(sizes) if roll.starts(w) < roll.starts(f) + 2 * S)


def predict_any(n, p, tick, within, due, S, s0):
    """An `any` instance due at `due` with n always-up hosts drawing with
    probability p per tick, all hosts merging at s0 + m*S (before the draws
    of that instant): -> (P(at least one run), P(two or more runs),
    E[runs]). Between two rounds hosts cannot learn of each other's runs, so
    each host that has not fired fires in the block with a = 1 - q^L (L
    ticks in the block), independently; the first block with a run ends the
    instance (docs/simulate.md)."""
    q = 1.0 - p
    end = due + within
    nt = -(-within // tick)           # ticks at due + i*tick < end
    # first round strictly after due; rounds split the ticks into blocks
    if due < s0:
        m = 0
    else:
        m = (due - s0) // S + 1
    blocks = []
    i = 0
    s = s0 + m * S
    while i < nt:
        # ticks with time < s belong to this block
        if s >= end:
            j = nt
        else:
            j = min(nt, -(-(s - due) // tick))
        if j > i:
            blocks.append(j - i)
        i = max(i, j)
        s += S
    reach = 1.0
    p_run = p_dup = e_runs = 0.0
    for L in blocks:
        a = 1.0 - q ** L
        none = (1.0 - a) ** n
        one = n * a * (1.0 - a) ** (n - 1)
        p_run += reach * (1.0 - none)
        p_dup += reach * (1.0 - none - one)
        e_runs += reach * n * a
        reach *= none
    return p_run, p_dup, e_runs


def rounded(x):
    """A figure as the report gives it: 6 significant digits."""
    return float('%.6g' % x)


def _dist(xs):
    if not xs:
        return {'n': 0}
    s = sorted(xs)
    n = len(s)
    return {'n': n, 'mean_s': rounded(sum(s) / n), 'p95_s': s[max(0, -(-95 * n // 100) - 1)], 'max_s': s[-1]}


