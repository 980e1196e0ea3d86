"""zone_rule(name): a tz= zone name -> its POSIX rule (tzr=), the rule the
companion passes to the core wherever it parses lines a user wrote
(jobline.parse, merging.merge, merging.canonical_lines: `add`, `check`,
`merge`, `plan`, the fleet folder's files, `image --jobs`, a scenario). A
board has no zone database: its lines carry tzr=. Its own module, so that
passing it costs nothing: fleet/zones.py (zoneinfo, the tz database) loads
on the first zone name a line gives."""


def zone_rule(name):
    from companion.fleet import zones
    return zones.posix_rule(name)
