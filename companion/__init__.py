"""The desktop companion of sporadic: the `companion` command (cli.py) and the library under it."""

# job lines may name a zone (tz=Europe/Berlin): the companion adds its POSIX rule
# (tzr=) before a line is signed; boards have no zone database
from sporadic.core import jobline as _jobline
from companion import zones as _zones
_jobline.zone_rule = _zones.posix_rule
