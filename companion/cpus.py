"""How many CPUs this process may run on: what `companion merge` and
`companion simulate` share their work among."""
import os


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))   # Linux: the CPUs this process is allowed, not the machine's
    except (AttributeError, OSError):
        return os.cpu_count() or 1
