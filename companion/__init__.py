"""The desktop companion of sporadic: the `companion` command (cli.py) and the library under it."""

# job lines may name a zone (tz=Europe/Berlin): the companion adds its POSIX rule
# (tzr=) before a line is signed; boards have no zone database. The zone module
# (zoneinfo, importlib.resources) loads on the first such line only.
from sporadic.core import jobline as _jobline


def _zone_rule(name):
    from companion.fleet import zones
    return zones.posix_rule(name)


_jobline.zone_rule = _zone_rule
