# A scenario's jobs shared among worker processes. No decision about one job
# reads anything of another: a host decides a job from its own clock and
# from that job's results in its file, and the world (outages, clock
# settings, which syncs happen and when) draws from random streams of its
# own. So a run over a subset of the jobs decides those jobs exactly as a
# run over all of them, and the parts add up to the one report
# (Report.assemble); tests/test_simulate.py checks the two equal.
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, wait

from sporadic.core import plan

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


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def workers_for(sim):
    """How many processes a run of sim is worth: one per CPU, at most one per
    DECISIONS_PER_WORKER estimated decisions."""
    work = sum(_decisions(sim, j) for j in range(sim.J))
    return max(1, min(_cpus(), sim.J, work // DECISIONS_PER_WORKER))


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


_done = None    # in a worker: the shared array of each group's share of the time simulated


def _start_worker(done):
    global _done
    _done = done


def _run_part(scn, seed, texts, slot):
    from companion.simulate.engine import Sim
    sim = Sim(dict(scn, jobs='\n'.join(texts)), seed)
    sim.progress = lambda f: _done.__setitem__(slot, f)
    return sim.run_part()


def run_parts(sim, n, progress=None):
    """Run sim's scenario in n processes, each over a group of its jobs ->
    their report parts. progress: called now and then with the share of the
    simulated time the slowest group has done."""
    groups = share(sim, n)
    # fork: spawn and forkserver import the caller's main module again,
    # which a script without a __main__ guard does not survive. A fork
    # inherits the caller's threads' locks, so the command's progress bar
    # runs without a thread (cli.py)
    ctx = multiprocessing.get_context('fork' if 'fork' in multiprocessing.get_all_start_methods() else 'spawn')
    done = ctx.Array('d', len(groups), lock=False)
    with ProcessPoolExecutor(len(groups), mp_context=ctx, initializer=_start_worker, initargs=(done,)) as pool:
        futures = [pool.submit(_run_part, sim.scn, sim.seed, [sim.job_texts[j] for j in g], i)
                   for i, g in enumerate(groups)]
        pending = futures
        while pending:
            pending = wait(pending, timeout=PROGRESS_S)[1]
            if progress is not None:
                progress(min(done))
        return [f.result() for f in futures]
