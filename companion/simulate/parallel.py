# A scenario's jobs shared among worker processes. No decision about one job
# reads anything of another: a host decides a job from its own clock and
# from that job's results in its file, and the world (outages, clock
# settings, which syncs happen and when) draws from random streams of its
# own. So a run over a subset of the jobs decides those jobs exactly as a
# run over all of them, and the parts add up to the one report
# (Report.assemble); tests/test_simulate.py checks the two equal.
# simulate() runs a scenario, in this process or shared among several.
import multiprocessing
import os
from multiprocessing import connection

from sporadic.core import plan
from companion.cpus import usable_cpus
from companion.errors import UserError
from companion.simulate.engine import Sim

DECISIONS_PER_WORKER = 200000   # estimated decisions below which a worker costs more than it saves
PROGRESS_S = 0.5                # how often the waiting parent reports the workers' progress


def _decisions(sim, j):
    """A rough count of the decisions job j takes over the run: eligible
    hosts x instances x decisions an instance (a run or miss, then a wait;
    an `any` also waits for its draws)."""
    job = sim.jobs[j]
    span = sim.end - sim.start
    every = job.every if job.cal is None else 86400
    instances = span // every + 1 if every else 1
    hosts = sum(1 for h in sim.hosts if plan.eligible(job, h.name))
    return hosts * instances * (3 if job.kind == 'any' else 2)


def workers_for(sim, asked=None):
    """How many processes a run of sim takes: `asked` if given (--workers),
    but one for --verify (its literal files live in one process) or a
    single job; else what the run is worth: one per CPU, at most one per
    DECISIONS_PER_WORKER estimated decisions."""
    if sim.verify or sim.J < 2:
        return 1
    if asked is not None:
        return max(1, asked)
    work = sum(_decisions(sim, j) for j in range(sim.J))
    return max(1, min(usable_cpus(), sim.J, work // DECISIONS_PER_WORKER))


def share(sim, n):
    """The jobs in n groups of about equal work (the largest job first to
    the lightest group), each in the scenario's order."""
    work = [_decisions(sim, j) for j in range(sim.J)]
    groups = [[] for _ in range(n)]
    load = [0] * n
    for j in sorted(range(sim.J), key=lambda j: -work[j]):
        g = load.index(min(load))
        groups[g].append(j)
        load[g] += work[j]
    return [sorted(g) for g in groups if g]


class _Orphaned(Exception):
    """In a worker: its parent is gone."""


def _worker(out, done, scn, seed, texts, slot, parent):
    """A worker: run the scenario over its jobs and send (True, part), or
    (False, the traceback) when it fails. It stops when its parent is gone
    (killed: nobody would read the part)."""
    import traceback

    def progress(f):
        if os.getppid() != parent:
            raise _Orphaned()
        done[slot] = f
    try:
        sim = Sim(dict(scn, jobs='\n'.join(texts)), seed)
        sim.progress = progress
        msg = (True, sim.run_part())
    except (_Orphaned, KeyboardInterrupt):   # Ctrl-C reaches the whole process group; the parent reports it
        return
    except BaseException:
        msg = (False, traceback.format_exc())
    out.send(msg)
    out.close()


class WorkerFailed(Exception):
    """A worker raised: its traceback is the message (a bug)."""


def run_parts(sim, n, progress=None):
    """Run sim's scenario in n processes, each over a group of its jobs ->
    their report parts. progress: called now and then with the share of the
    simulated time the slowest group has done. The first worker to fail
    stops the others at once: its exception (WorkerFailed) or, for a
    worker that died (killed, out of memory), a UserError."""
    groups = share(sim, n)
    # fork: spawn and forkserver import the caller's main module again,
    # which a script without a __main__ guard does not survive. A fork
    # inherits the caller's threads' locks, so the command's progress bar
    # runs without a thread (cli.py)
    ctx = multiprocessing.get_context('fork' if 'fork' in multiprocessing.get_all_start_methods() else 'spawn')
    done = ctx.Array('d', len(groups), lock=False)
    procs = []
    waiting = {}
    try:
        for i, g in enumerate(groups):
            recv, send = ctx.Pipe(duplex=False)
            texts = [sim.job_texts[j] for j in g]
            p = ctx.Process(target=_worker, args=(send, done, sim.scn, sim.seed, texts, i, os.getpid()), daemon=True)
            p.start()
            send.close()
            procs.append(p)
            waiting[recv] = i
        parts = [None] * len(groups)
        while waiting:
            ready = connection.wait(list(waiting), timeout=PROGRESS_S)
            if not ready and progress is not None:
                progress(min(done))
            for c in ready:
                i = waiting.pop(c)
                try:
                    ok, value = c.recv()
                except EOFError:    # it died before sending its part
                    ok = None
                finally:
                    c.close()
                if ok is None:
                    procs[i].join()
                    raise UserError('simulate: worker %d of %d died (%s); --workers 1 runs the jobs in this '
                                    'process and uses less memory' % (i + 1, len(groups), _death(procs[i].exitcode)))
                if not ok:
                    raise WorkerFailed('worker %d of %d failed:\n%s' % (i + 1, len(groups), value))
                parts[i] = value
        if progress is not None:
            progress(min(done))
        return parts
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()
        for c in waiting:
            c.close()


def _death(code):
    if code == -9:
        return 'killed by SIGKILL, as the kernel does when memory runs out'
    if code is not None and code < 0:
        return 'killed by signal %d' % -code
    return 'exit status %s' % code


def simulate(scn, seed=None, verify=False, workers=None, progress=None):
    """Run a scenario -> its report. workers: processes to share the jobs
    among; None: as many as there are CPUs when the run is large enough to
    gain from them. --verify runs in one. progress: called now and then
    with the share of the simulated time done (0..1)."""
    sim = Sim(scn, seed, verify)
    workers = workers_for(sim, workers)
    if workers == 1:
        sim.progress = progress
        return sim.run()
    return sim.assemble(run_parts(sim, workers, progress))
