# The report as text (one run, a sweep) and the sweep's plot.
from sporadic.core.timeutil import parse_duration
from companion.errors import UserError

def human(s):
    if s is None:
        return '-'
    neg = s < 0
    s = abs(int(round(s)))
    if s < 60:
        t = '%ds' % s
    elif s < 3600:
        t = '%dm%02ds' % (s // 60, s % 60) if s % 60 else '%dm' % (s // 60)
    elif s < 86400:
        t = '%dh%02dm' % (s // 3600, s % 3600 // 60)
    else:
        t = '%dd%02dh' % (s // 86400, s % 86400 // 3600)
    return ('-' if neg else '') + t


def _size(n):
    for unit, div in (('GB', 1e9), ('MB', 1e6), ('kB', 1e3)):
        if n >= div:
            return '%.1f %s' % (n / div, unit)
    return '%d B' % n


def _dd(d):
    if not d.get('n'):
        return '-'
    return '%s/%s' % (human(d['mean_s']), human(d['p95_s']))


def text(rep):
    out = []
    w = out.append
    w('scenario %s (seed %s): %d hosts, %d companions, %s .. %s'
      % (rep['scenario'] or '-', rep['seed'], rep['hosts'], rep['companions'], rep['start'], rep['end']))
    w('')
    w('%-8s %-4s %5s %7s %8s %6s %6s %7s %6s  %-15s %-15s' % (
        'job', 'type', 'inst', 'expect', 'runs', 'dups', 'd-inst', 'cross', 'missed', 'delay mean/p95',
        'all knew m/p95'))
    for r in rep['jobs']:
        w('%-8s %-4s %5d %7d %8d %6d %6d %7d %6d  %-15s %-15s' % (
            r['id'], r['type'], r['instances'], r['expected_runs'], r['runs'], r['duplicate_runs'],
            r['duplicate_instances'], r['cross_section_duplicates'], r['missed'], _dd(r['delay']),
            _dd(r['all_knew']) if 'all_knew' in r else '-'))
    for r in rep['jobs']:
        ro = r.get('rollout')
        if ro:
            w('rollout %s%s: %s; %d ran%s' % (
                r['id'], ' (failing)' if ro['failing'] else '',
                ', '.join('wave %d (%d hosts, +%s): %d ran, %d aborted' % (
                    x['wave'], x['hosts'], human(x['starts_after_s']), x['ran'], x['aborted']) for x in ro['waves']),
                ro['ran'], ', bound %d' % ro['bound'] if 'bound' in ro else
                (' (no bound: %s)' % ro['bound_why_not'] if 'bound_why_not' in ro else '')))
    why = ['%s %s' % (r['id'], ', '.join('%s %d' % kv for kv in r['miss_records'].items()))
           for r in rep['jobs'] if r.get('miss_records')]
    if why:
        w('miss records of calendar jobs: ' + '; '.join(why))
    w('')
    w('by type:')
    for k, a in rep['by_type'].items():
        w('  %-4s %3d jobs: %d runs of %d expected, %d duplicate runs (%d instances, %d across sections), '
          '%d missed, delay %s%s' % (
              k, a['jobs'], a['runs'], a['expected_runs'], a['duplicate_runs'], a['duplicate_instances'],
              a['cross_section_duplicates'], a['missed'], _dd(a['delay']),
              (', all hosts knew after %s' % _dd(a['all_knew'])) if 'all_knew' in a else ''))
    s = rep['sync']
    w('')
    w('syncs: %d ok, failed %d (host down %d, split %d, link %d); %s moved, %s a sync (%d B overhead a party)' % (
        s['ok'], s['failed_down'] + s['failed_split'] + s['failed_random'], s['failed_down'],
        s['failed_split'], s['failed_random'], _size(s['bytes']), _size(s['bytes_per_sync']),
        s['overhead_per_party']))
    f = rep['file_at_end']
    w('file at end: hosts %.0f lines / %s mean, %d lines / %s max%s' % (
        f['host_lines_mean'], _size(f['host_bytes_mean']), f['host_lines_max'], _size(f['host_bytes_max']),
        ('; companion %d lines / %s' % (f['companion_lines'], _size(f['companion_bytes'])))
        if 'companion_lines' in f else ''))
    c = rep['counts']
    w('work: %d sync events, %d job wakes, %d decisions' % (c['sync_events'], c['job_wakes'], c['decisions']))
    for a in rep['analytic']:
        if not a['applies']:
            w('analytic (any %s): does not apply: %s' % (a['job'], a['why_not']))
        else:
            w('analytic (any %s, %d hosts, p=%s a %s tick, mesh every %s): P(dup | run) predicted %.4f, '
              'measured %.4f +- %.4f (%d instances run, z=%.2f); runs per instance predicted %.3f, measured %.3f'
              % (a['job'], a['hosts'], a['p'], human(a['tick_s']), human(a['sync_s']), a['predicted_p_dup'],
                 a['measured_p_dup'], a['sigma'], a['instances_run'], a['z'],
                 a['predicted_runs_per_run_instance'], a['measured_runs_per_run_instance']))
    if rep['duplicates']:
        w('')
        n = sum(a['duplicate_instances'] for a in rep['by_type'].values())
        w('duplicates (%d instances%s):' % (n, ', first 20 shown' if n > 20 else ''))
        for d in rep['duplicates'][:20]:
            w('  %s due %s: %s%s' % (d['instance'], d['due'],
                                     ', '.join('%s at %s' % (r['host'], r['at']) for r in d['runs']),
                                     '  [across sections]' if d['cross_section'] else ''))
    return '\n'.join(out) + '\n'


def sweep_text(key, rows):
    out = ['sweep %s' % key, '']
    out.append('%-10s %-4s %8s %8s %8s %8s %8s %10s' % (
        'value', 'type', 'inst', 'runs', 'dups', 'dup-inst', 'missed', 'bytes'))
    for v, rep in rows:
        for k, a in rep['by_type'].items():
            out.append('%-10s %-4s %8d %8d %8d %8d %8d %10s' % (
                v, k, a['instances'], a['runs'], a['duplicate_runs'], a['duplicate_instances'],
                a['missed'], _size(rep['sync']['bytes'])))
    an = [(v, a) for v, rep in rows for a in rep['analytic'] if a['applies']]
    if an:
        out.append('')
        out.append('analytic (any): P(dup | run) predicted vs measured')
        for v, a in an:
            out.append('%-10s %s  predicted %.4f  measured %.4f +- %.4f  (n=%d, z=%.2f)' % (
                v, a['job'], a['predicted_p_dup'], a['measured_p_dup'], a['sigma'], a['instances_run'], a['z']))
    return '\n'.join(out) + '\n'


def plot(key, rows, path):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'sporadic[plot]' (or pip install matplotlib)")
    xs = []
    for v, _ in rows:
        try:
            xs.append(parse_duration(v) / 3600.0 if isinstance(v, str) else float(v))
        except ValueError:
            xs.append(float(len(xs)))
    dur = all(isinstance(v, str) for v, _ in rows)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    kinds = sorted(set(k for _, rep in rows for k in rep['by_type']))
    for k in kinds:
        d = [rep['by_type'].get(k, {}).get('duplicate_runs', 0) / max(1, rep['by_type'].get(k, {}).get('instances', 0))
             for _, rep in rows]
        m = [rep['by_type'].get(k, {}).get('missed', 0) / max(1, rep['by_type'].get(k, {}).get('expected_runs', 0))
             for _, rep in rows]
        a1.plot(xs, d, marker='o', label=k)
        a2.plot(xs, m, marker='o', label=k)
    for ax, title in ((a1, 'duplicate runs per instance'), (a2, 'missed / expected runs')):
        ax.set_xlabel(key + (' (hours)' if dur else ''))
        if dur:
            ax.set_xscale('log')
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


