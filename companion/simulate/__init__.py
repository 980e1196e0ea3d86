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
#   parallel.py  the jobs shared among processes; the parts assembled
#   output.py    the report as text; the sweep's plot
#   cli.py       the verb and --sweep
from companion.simulate.scenario import expand, select, load, dumps, _time  # noqa: F401
from companion.simulate.engine import Sim, SYNC_OVERHEAD, simulate  # noqa: F401
from companion.simulate.report import predict_any  # noqa: F401
from companion.simulate.cli import add_parser, command, main, sweep_values  # noqa: F401
