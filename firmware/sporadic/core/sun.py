# Sunrise and sunset from the NOAA solar equations, in a form that keeps its accuracy
# with 32-bit floats (rp2, esp8266): time is an integer day since J2000 plus a small day
# fraction, the large angle terms are reduced per whole day, and only minutes within
# the day are floats (epoch seconds in a 32-bit float would be 2 minutes coarse).
import math

try:
    from micropython import const
except ImportError:
    def const(x):
        return x

J2000_DAY = const(10957)       # 2000-01-01 in days since 1970-01-01; J2000.0 is its noon
_ZENITH = math.cos(math.radians(90.833))   # refraction and the sun's radius
_RAD = math.pi / 180


def _turns(day, eps):
    # day * (1 - eps) degrees mod 360 for an integer day, without the large product
    # day * 0.9856 in a float (32-bit floats would lose a minute of time in it)
    return (day % 360) - (day * eps) % 360


def _sun(day, frac):
    # (declination in radians, equation of time in minutes) at day + frac days from
    # J2000.0 (day an int, frac a small float)
    jc = (day + frac) / 36525.0
    L0 = (280.46646 + _turns(day, 0.01435264) + 0.98564736 * frac + 0.0003032 * jc * jc) % 360
    M = (357.52911 + _turns(day, 0.01439972) + 0.98560028 * frac - 0.0001537 * jc * jc) % 360
    e = 0.016708634 - jc * (0.000042037 + 0.0000001267 * jc)
    Mr = M * _RAD
    C = (math.sin(Mr) * (1.914602 - jc * (0.004817 + 0.000014 * jc))
         + math.sin(2 * Mr) * (0.019993 - 0.000101 * jc) + math.sin(3 * Mr) * 0.000289)
    omega = (125.04 - 0.052954 * (day + frac)) * _RAD   # 1934.136 degrees a century
    lam = (L0 + C - 0.00569 - 0.00478 * math.sin(omega)) * _RAD
    eps0 = 23 + (26 + (21.448 - jc * (46.815 + jc * (0.00059 - jc * 0.001813))) / 60) / 60
    eps = (eps0 + 0.00256 * math.cos(omega)) * _RAD
    decl = math.asin(math.sin(eps) * math.sin(lam))
    y = math.tan(eps / 2)
    y *= y
    L0r = L0 * _RAD
    eqt = 4 / _RAD * (y * math.sin(2 * L0r) - 2 * e * math.sin(Mr)
                      + 4 * e * y * math.sin(Mr) * math.cos(2 * L0r)
                      - 0.5 * y * y * math.sin(4 * L0r) - 1.25 * e * e * math.sin(2 * Mr))
    return decl, eqt


def event(day, lat, lon, rising):
    """UTC epoch seconds of sunrise (rising true) or sunset on civil date `day` (days
    since 1970-01-01, the date at longitude lon); None when the sun does not rise or
    set that day (polar day or night). lat/lon in degrees, east positive."""
    d = day - J2000_DAY
    minutes = 720 - 4 * lon   # first guess: local solar noon, minutes after 00:00 UTC
    latr = lat * _RAD
    for _ in range(2):
        decl, eqt = _sun(d, (minutes - 720) / 1440)
        c = _ZENITH / (math.cos(latr) * math.cos(decl)) - math.tan(latr) * math.tan(decl)
        if c < -1 or c > 1:
            return None
        ha = math.acos(c) / _RAD
        minutes = 720 - 4 * lon - eqt + (-4 * ha if rising else 4 * ha)
    return day * 86400 + int(math.floor(minutes * 60 + 0.5))


def noon(day, lon):
    """UTC epoch seconds of local mean solar noon on `day` at longitude lon: where a day
    without sunrise or sunset is placed."""
    return day * 86400 + int(43200 - 240 * lon)
