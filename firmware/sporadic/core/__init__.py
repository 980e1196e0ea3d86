"""The portable core: line format, merge, planner, calendar, sync protocol and signature checks; runs unchanged on MicroPython and CPython."""
