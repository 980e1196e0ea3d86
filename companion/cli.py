"""The `companion` command line: one table of verb groups (VERB_GROUPS), each
a module of companion/commands/ with one `add_parsers(subparsers)` hook, and
main(), which runs one verb on a clock it is given and turns what the user
can cause into one line and exit status 2. The verbs are argparse and
printing only; the work is the layers below (link/ fleet/ sync/ make/
vboard/ simulate/), which never re-implement a rule of the core."""
import argparse
import importlib
import os
import sys
import time

from companion.errors import UserError

# The verbs, by group, in the order `companion -h` lists them: module
# companion.commands.NAME, its add_parsers(subparsers) adds the group's verbs.
VERB_GROUPS = (
    'core',       # check, merge, plan: the job-line contract
    'fleet',      # init, add, cancel, keys, jobs, results, status: the fleet folder
    'board',      # deploy, sync, net, serve: through a link to a board
    'vboard',     # vboard: a virtual board
    'make',       # image, flash: a board's filesystem image, written to the chip
    'simulate',   # simulate: a fleet on the real core, simulated
    'demo',       # demo: three virtual boards end to end
    'ui',         # ui: the fleet as a read-only local web page
)
# The core's verbs are the only group a git merge driver (one `companion
# merge` per file) needs: for those the other groups are not imported.
CORE_VERBS = ('check', 'merge', 'plan')


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line too (`companion VERB -h` for the usage)."""

    def error(self, message):
        raise UserError('%s (see `%s -h`)' % (message, self.prog))


def verb_of(argv):
    """The verb on a command line (the first word that is not an option or
    --fleet's value), or None."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == '--fleet':
            skip = True
        elif not a.startswith('-'):
            return a
    return None


def build_parser(core_only=False):
    """The whole command line; core_only: the core's verbs alone, without
    importing the other verb groups (a git merge driver starts one per file)."""
    p = Parser(prog='companion', description='sporadic: jobs for sometimes-connected MicroPython boards')
    p.add_argument('--version', action='version', version='companion %s' % version())
    p.add_argument('--debug', action='store_true',
                   help='on an error, show the traceback instead of one line')
    p.add_argument('--fleet', default=os.environ.get('SPORADIC_FLEET', '.'),
                   help='fleet folder (default: $SPORADIC_FLEET or the current folder)')
    sub = p.add_subparsers(dest='verb', metavar='VERB')
    sub.required = True

    for group in VERB_GROUPS[:1] if core_only else VERB_GROUPS:
        importlib.import_module('companion.commands.' + group).add_parsers(sub)
    return p


def version():
    """The installed sporadic distribution's version (pyproject.toml)."""
    try:
        from importlib.metadata import version as v
        return v('sporadic')
    except Exception:   # a checkout that was never installed
        return 'unknown (not installed)'


def one_line(text):
    return ' '.join(str(text).split())


def main(argv=None, clock=time.time):
    """Run one verb. A condition the user can cause ends in one line on
    stderr, `companion: <what happened>`, exit status 2 (UserError: raised by
    the verbs, which turn link, esptool and file failures into one). Anything
    else is a bug: one line naming it, exit status 70 (EX_SOFTWARE), with
    --debug (or SPORADIC_DEBUG=1) the traceback instead, for the report.
    clock: the companion's wall clock, UTC seconds (time.time); each verb
    reads `now` from it (args.clock), a test passes its own."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # --debug anywhere on the line (`companion sync PORT --debug` too)
    debug = '--debug' in argv or bool(os.environ.get('SPORADIC_DEBUG'))
    argv = [a for a in argv if a != '--debug']
    try:
        verb = verb_of(argv)
        args = build_parser(core_only=verb in CORE_VERBS).parse_args(argv)
        args.clock = clock
        return args.func(args) or 0
    except UserError as e:
        if debug:
            raise
        print('companion: ' + one_line(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print('companion: interrupted', file=sys.stderr)
        return 130
    except OSError as e:
        if debug:
            raise
        if e.filename is not None:   # a file or folder the user named or holds: not a bug
            print('companion: %s: %s' % (e.filename, one_line(e.strerror or e)), file=sys.stderr)
            return 2
        print('companion: internal error (a bug, please report it): %s: %s; run with --debug for the traceback'
              % (type(e).__name__, one_line(e)), file=sys.stderr)
        return 70
    except Exception as e:
        if debug:
            raise
        print('companion: internal error (a bug, please report it): %s: %s; run with --debug for the traceback'
              % (type(e).__name__, one_line(e)), file=sys.stderr)
        return 70


if __name__ == '__main__':
    sys.exit(main())
