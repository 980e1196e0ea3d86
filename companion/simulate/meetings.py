# When parties meet: a companion's visits, contacts between two parties, a
# mesh's rounds (each an event of engine.py's loop, which this mixin of Sim
# schedules again), and whether a meeting can happen (both up, not split
# by a partition, not a random failure).
from array import array

from companion.simulate.logs import Raises

JUMP_S, JUMPS_KEPT = 300, 4   # device/clock.py's: a clock change it records as a jump, and how many
VISIT, CONTACT, MESH = 'v', 'c', 'm'   # the events' kinds


class Meetings:
    def _can(self, x, y, t, fail, rng):
        for p in (x, y):
            if p < self.H and not self.hosts[p].up.up(t):
                self.stats['sync_failed_down'] += 1
                return False
        if self._apart(x, y, t):
            self.stats['sync_failed_split'] += 1
            return False
        if fail and rng.random() < fail:
            self.stats['sync_failed_random'] += 1
            return False
        return True

    def _visit(self, li, x, t):
        v = self.visits[li]
        rng = self._vrng.get((li, x))
        if rng is None:
            rng = self._vrng[(li, x)] = self._rng('visit', li, self.names[x])
            rng.random()  # the phase draw
        c = v['companion']
        if self._can(c, x, t, v['fail'], rng):
            self._sync(c, x, t)
            if v['clock'] and self.hosts[x].drift:
                h = self.hosts[x]
                by = t - self.local(x, t)
                if abs(by) > JUMP_S:   # the board records it (device/clock.py), miss_reason reads it
                    h.jumps.append((t, by))
                    if len(h.jumps) > JUMPS_KEPT:
                        h.jumps.pop(0)
                h.ts = t          # the companion sets the board's clock
                h.floor = t
                h.wake = -1
        nt = t + v['interval']
        if v['jitter']:
            nt += rng.uniform(-v['jitter'], v['jitter'])
        self._push(max(self._grid(nt), t + self.res), VISIT, li, x)

    def _contact(self, li, x, t):
        c = self.contacts[li]
        rng = self._crng.get((li, x))
        if rng is None:
            rng = self._crng[(li, x)] = self._rng('contact', li, self.names[x])
            rng.expovariate(c['rate'])  # the first gap
        b = c['b']
        y = None
        for _ in range(8):
            y = b[int(rng.random() * len(b))]
            if y != x:
                break
        if y is not None and y != x and self._can(x, y, t, c['fail'], rng):
            self._sync(x, y, t)
        self._push(max(self._grid(t + rng.expovariate(c['rate'])), t + self.res), CONTACT, li, x)

    def _mesh(self, li, t):
        m = self.meshes[li]
        rng = self._mrng.get(li)
        if rng is None:
            rng = self._mrng[li] = self._rng('mesh', li)
        groups = {}
        for x in m['parties']:
            if x < self.H and not self.hosts[x].up.up(t):
                self.stats['sync_failed_down'] += 1
                continue
            if m['fail'] and rng.random() < m['fail']:
                self.stats['sync_failed_random'] += 1
                continue
            key = tuple(sec[x] for split, heal, sec in self.parts if split <= t < heal)
            groups.setdefault(key, []).append(x)
        if len(groups) > 1:
            self.stats['sync_failed_split'] += len(groups) - 1   # rounds cut by a partition
        for key, g in groups.items():
            if len(g) < 2:
                continue
            for x in g:
                if x < self.H and self.hosts[x].wake < t:
                    self._advance(x, t)
            U = array('i', map(max, *[self.V[x] for x in g]))
            agg = self._union(U)
            n = 0
            for x in g:
                n += self._recv(x, self.V[x], U, agg, t)
            if self.verify:
                self._check_sync(g, U, n)
            for x in g:
                self.V[x] = U[:]
                self.vgen[x] += 1
                self.raises[x] = Raises()
                self.mark[x] = None
                self.partner[x] = -1
            self.stats['syncs'] += 1
            self.stats['line_bytes'] += n
            self.stats['overhead_bytes'] += self.overhead * len(g)
        nt = t + m['interval']
        if m['jitter']:
            nt += rng.uniform(-m['jitter'], m['jitter'])
        self._push(max(self._grid(nt), t + self.res), MESH, li, 0)
