"""The fleet folder and what it holds: the folder and its records (folder),
keys, provisioning, the board files, merging line files, time zones, atomic
writes, and the queries every view uses (queries)."""
