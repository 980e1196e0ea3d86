"""The actions a fleet's boards can run: each kind's built-in actions
(boards/KIND/board.json), the functions of the /actions.py deploy found on a
board, and FLEET/actions.py (deploy puts it on every board)."""

USER_ACTIONS = 'actions.py'   # FLEET/actions.py: the user's actions, deployed as each board's /actions.py


def action_names(text, name='actions.py'):
    """The public top-level function names of an actions.py's text (what a
    board's actions.find takes from it); none when it does not parse."""
    import ast
    try:
        tree = ast.parse(text, name)
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith('_')}


def fleet_actions(fleet):
    """The actions of FLEET/actions.py (none without one)."""
    try:
        with open(fleet.path(USER_ACTIONS), encoding='utf-8', errors='replace') as f:
            return action_names(f.read())
    except OSError:
        return set()


def action_table(fleet):
    """{board id or kind: {action}}: what each board of the fleet runs: its
    kind's built-in actions (boards/KIND/board.json "actions"), the functions
    of the /actions.py deploy found on it (devices/ID.json "user_actions")
    and those of FLEET/actions.py (deploy puts it on every board). A fleet
    without boards yet: every kind of board."""
    from companion.fleet import files
    kinds = files.boards().names()
    extra = fleet_actions(fleet)
    table = {}
    for d in fleet.devices():
        if d.get('board') in kinds:
            table[d['id']] = (set(files.board_data(d['board']).get('actions') or ()) |
                              set(d.get('user_actions') or ()) | extra)
    if not table:
        table = {k: set(files.board_data(k).get('actions') or ()) | extra for k in kinds}
    return table


def action_problem(job, table):
    """None when some board of `table` runs job's action; else one line naming
    the actions the fleet's boards run."""
    name = job.action()
    if any(name in acts for acts in table.values()):
        return None
    runs = sorted(set().union(*table.values())) if table else []
    return ('no board of this fleet (%s) has an action %r; they run: %s (an action of your own: a function '
            'in the fleet folder\'s actions.py, which deploy puts on each board)'
            % (', '.join(sorted(table)), name, ', '.join(runs)))
