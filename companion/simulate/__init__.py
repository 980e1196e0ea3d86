# companion simulate: a discrete-event fleet simulator on the real core
# (docs/simulate.md). Every decision is plan.decide, every record is
# jobline.Result(...).line(), every rank is plan.score, every `any` draw is
# plan.hash_rnd; what a host knows is its copy of the job-line file under
# merge, held as a version vector over the parties' record logs (logs.py);
# --verify keeps the literal line sets too and checks every sync against
# merging.merge and every decision against groups.scan of the host's lines.
#
#   scenario.py  the fleet a scenario describes (parsing, uptime, clocks)
#   logs.py      what each party knows; sync bytes
#   engine.py    the event loop: wakes, decisions, syncs
#   verify.py    --verify: the literal files
#   report.py    the figures; the closed form for `any`
#   parallel.py  simulate(): the jobs shared among processes; the parts assembled
#   output.py    the report as text; the sweep's plot
#
# The verb (`companion simulate`, --sweep) is companion/commands/simulate.py.
# Import what you use from its module (nothing is re-exported here).
