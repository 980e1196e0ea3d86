"""Deploy and sync: what the verbs do with a link. The link (serial or TCP,
companion/link/open.py) moves the bytes; the fleet folder (companion/fleet/folder.py)
holds the state; the reconciliation is the core's (sporadic.core.recon), the
merge the core's (sporadic.desktop.merging), the MAC check the core's
(sporadic.core.hmac).

    deploy(fleet, port, ...)        firmware and provisioning onto a board
    sync(fleet, port, ...)          merge both ways with one board
    fleet_server(fleet, port, ...)  the server boards that wake up sync to
"""
import json
import os
import re
import time
from contextlib import contextmanager

from sporadic.core import jobline, recon
from sporadic.core import recondrv
from sporadic.desktop import merging
from companion.errors import UserError
from companion.fleet import files
from companion.link import open as links
from companion.fleet.actions import USER_ACTIONS, action_names, fleet_actions
from companion.fleet.board_keys import device_secret, read_fleet_key, secret_for, verify_result
from companion.link.base import LinkError, NotSporadic
from companion.sync import prior, vouches
from companion.sync.outbox import board_answer, board_status, outbox


@contextmanager
def progress_bar(link, label, enabled=True):
    """A rich progress bar fed by the link's byte counters."""
    if not enabled:
        yield
        return
    from rich.progress import Progress, TextColumn, BarColumn, DownloadColumn, TransferSpeedColumn
    with Progress(TextColumn('[bold]%s' % label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as p:
        task = p.add_task(label, total=None)
        link.progress = lambda s, r: p.update(task, completed=s + r)
        try:
            yield
        finally:
            link.progress = None


# -- deploy ----------------------------------------------------------------------

BOARD_PROBE = ("import sys, os\n"
               "m = getattr(os.uname(), 'machine', '') if hasattr(os, 'uname') else ''\n"
               "m = getattr(sys.implementation, '_machine', m) or m\n"
               "print(sys.platform + '|' + m + '|' + str(getattr(sys.implementation, '_mpy', '')))\n")
ID_PROBE = ("import os\n"
            "i = os.getenv('SPORADIC_ID') if hasattr(os, 'getenv') else None\n"
            "if not i:\n"
            "    import machine, binascii\n"
            "    i = binascii.hexlify(machine.unique_id()).decode()[-8:]\n"
            "print(i)\n")


# Is sporadic frozen into this board's MicroPython firmware (built with
# boards/<name>/manifest.py)? A frozen module's __file__ is not a path on
# the flash, and '.frozen' comes before '/lib' on sys.path. Or is it in the
# board's ROMFS partition (/rom/lib/sporadic: `companion image --romfs`,
# #31), found when no /lib/sporadic comes first? Either way the firmware
# holds it: deploy writes no /lib/sporadic. (timeutil imports nothing else:
# no board module is needed yet.)
FROZEN_PROBE = ("try:\n"
                " import sporadic.core.timeutil as m\n"
                " print('F' if m.__file__[:1] != '/' or m.__file__[:5] == '/rom/' else 'L')\n"
                "except ImportError:\n"
                " print('-')\n")


# A board's watchdog keeps running across soft resets once its loop started it (ESP8266: 5 s):
# deploy feeds it between files, as the sync server does at each request (docs/hardware.md#the-watchdog).
FEED = ("try:\n"
        " import board\n"
        " board.wdt_feed()\n"
        "except Exception:\n"
        " pass\n")
FEED_S = 1.0   # seconds of deploy between two feeds


def probe_board(link):
    """(sys.platform, machine, sys.implementation._mpy or None) of what answers."""
    f = link.exec(BOARD_PROBE).strip().split('|')
    f += [''] * (3 - len(f))
    return f[0], f[1], int(f[2]) if f[2].isdigit() else None


def board_of(plat, machine):
    """The board folder name for what a port reports, or None."""
    if plat == 'linux' or plat == 'darwin':
        return 'unix'
    if plat == 'esp32':
        return 'esp32s3' if 'S3' in machine.upper() else 'esp32'
    if plat == 'esp8266':
        return 'esp8266'
    if plat == 'rp2':  # _machine: 'Raspberry Pi Pico W with RP2040' / 'Raspberry Pi Pico with RP2040'
        return 'rp2-pico-w' if 'Pico W' in machine else 'rp2-pico'
    return None


def detect_board(link):
    plat, machine, _ = probe_board(link)
    name = board_of(plat, machine)
    if name is None:
        raise UserError('unknown board platform %r (%s): pass --board' % (plat, machine))
    return name


# sys.implementation._mpy >> 10 & 15: the native code architecture (py/persistentcode.h)
MPY_ARCHS = ('', 'x86', 'x64', 'armv6', 'armv6m', 'armv7m', 'armv7em', 'armv7emsp', 'armv7emdp',
             'xtensa', 'xtensawin', 'rv32imc')


def known_board(name):
    """board.json of --board NAME; an unknown name is one line listing the known ones."""
    names = files.boards().names()
    if name not in names:
        raise UserError('unknown board %r (known: %s)' % (name, ', '.join(names)))
    return files.board_data(name)


def check_board(link, name, port):
    """--board NAME against what answers on the port (sys.platform, machine,
    the native architecture of sys.implementation._mpy) and the board's facts
    (boards/NAME/board.json: port, machine, mpy_arch): a mismatch is refused
    before anything is written."""
    data = known_board(name)
    plat, machine, mpy = probe_board(link)
    seen = board_of(plat, machine)
    want_plat = 'linux' if data.get('port') == 'unix' else data.get('port')
    arch = MPY_ARCHS[(mpy >> 10) & 15] if mpy is not None and (mpy >> 10) & 15 < len(MPY_ARCHS) else ''
    why = None
    if plat != want_plat and not (data.get('port') == 'unix' and plat == 'darwin'):
        why = 'its sys.platform is %r, a %s board\'s is %r' % (plat, name, want_plat)
    elif seen is not None and seen != name:
        why = 'it says it is %r, which is board %s' % (machine, seen)
    elif data.get('machine') and machine and data['machine'] != machine:
        why = 'it says it is %r, a %s says %r' % (machine, name, data['machine'])
    elif data.get('mpy_arch') and arch and arch != data['mpy_arch']:
        why = 'its native code is %s, a %s\'s is %s' % (arch, name, data['mpy_arch'])
    if why:
        todo = ('deploy with --board %s, or without --board (the board is asked)' % seen if seen else
                'choose the --board it is (known: %s)' % ', '.join(files.boards().names()))
        raise UserError('%s does not answer as --board %s (%s): %s; nothing was written' % (port, name, why, todo))
    return name


# -- which fleet a board belongs to -------------------------------------------------

def fleet_ids(fleet):
    """(keyids, peer id): the keyids of this fleet's public keys (current and
    retired; none in an insecure fleet) and hmac.key_id of its fleet key: what
    a board of this fleet answers to `F` (syncsrv.fleet_ids)."""
    from sporadic.core import hmac, rsa
    kids = set()
    if not fleet.insecure:
        from companion.fleet import keys
        kids = {rsa.keyid(p) for p in keys.trusted_pubs(fleet.dir)}
    key = read_fleet_key(fleet)
    return kids, hmac.key_id(key) if key else None


def board_fleet(cfg):
    """A board's /cfg.json (a dict) -> its `F` answer (the core's hmac.fleet_ids)."""
    from sporadic.core import hmac
    return hmac.fleet_ids(cfg)


class ForeignBoard(UserError):
    """The board belongs to another fleet: nothing was exchanged or written."""


UNKNOWN_REQUEST = '!unknown request'     # what a board's firmware answers a request it predates (core/recon.py)


def check_fleet(fleet, answer, port, moving=False):
    """Raise ForeignBoard when a board's `F` answer names another fleet than
    this one's (neither its key nor its fleet key is this fleet's). A board
    naming no fleet (never deployed, or firmware without `F`: its answer is
    recon's `!unknown request`) passes; a board that could not answer (out
    of memory, a damaged /cfg.json) is refused in one line, as a foreign
    one: which fleet it belongs to is not known, so nothing moves."""
    if answer.startswith('!') and answer != UNKNOWN_REQUEST:
        raise UserError('%s could not say which fleet it belongs to (%s): nothing was exchanged; sync it '
                        'again (a board out of memory answers from a fresh heap after a reset)'
                        % (port, answer.lstrip('!')))
    f = answer.split()
    if answer.startswith('!') or len(f) < 3 or (f[0] == '-' and f[1] == '-'):
        return None
    kids, peer = fleet_ids(fleet)
    if (f[1] != '-' and f[1] == peer) or (f[0] != '-' and f[0] in kids):
        return None
    theirs = ('key %s' % f[0]) if f[0] not in ('-', '?') else ('fleet key %s' % f[1])
    ours = ('key %s' % keyid_of(fleet)) if kids else ('fleet key %s' % peer)
    if moving:
        return theirs
    raise ForeignBoard('%s on %s belongs to another fleet (%s), not to %s (%s): sync it from the fleet '
                       'folder that deployed it, or move it here with `companion deploy %s --force` '
                       '(its jobs and results of the other fleet are cleared)'
                       % (f[2], port, theirs, fleet.meta['name'], ours, port))


def keyid_of(fleet):
    from companion.fleet import keys
    return keys.keyid(fleet.dir)


def read_board_cfg(link):
    """The board's /cfg.json as a dict ({}: none, or not JSON)."""
    try:
        cfg = json.loads(link.get_file('/cfg.json'))
    except (FileNotFoundError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def clear_state(link):
    """Remove a board's job state (files.STATE_FILES, the outbox folder):
    `deploy --force` moving it from another fleet."""
    link.exec('import os\n'
              'for p in %r:\n try: os.remove(p)\n except OSError: pass\n'
              'try:\n for n in os.listdir(%r): os.remove(%r + "/" + n)\n'
              ' os.rmdir(%r)\nexcept OSError: pass\n'
              % (files.STATE_FILES, files.OUTBOX_DIR, files.OUTBOX_DIR, files.OUTBOX_DIR))


def deploy(fleet, port, dev_id=None, board=None, network=None, compile=True, progress=True, link=None,
           position=None, force=False):
    """Put firmware, board module and the board's provisioning
    (companion/fleet/provision.py: identity, secret, public key, fleet key, replay
    floor, network, position) on a board. A board already deployed keeps its job state
    (jobs.txt, logs, outbox). The fleet changes only once every file is on
    the board."""
    from companion.fleet import provision
    own = link is None
    link = link or links.open_link(port, secret_for(fleet))
    try:
        fresh_heap(link)
        moved = check_fleet(fleet, board_fleet(read_board_cfg(link)), port, moving=force)
        board = check_board(link, board, port) if board else detect_board(link)
        if dev_id is None:
            raw = link.exec(ID_PROBE).strip()
            dev_id = raw if '-' in raw else '%s-%s' % (board, raw)
        prov = provision.prepare(fleet, dev_id, board, network, position=position)
        frozen = link.exec(FROZEN_PROBE).strip().endswith('F')
        todo = files.firmware_files(board, compile, frozen, cfg=prov.extra) + prov.config_files()
        # the user's actions: the fleet's actions.py goes onto the board; else
        # the board's own is read, so that `add` and `check` know its actions
        user = fleet_actions(fleet)
        if os.path.isfile(fleet.path(USER_ACTIONS)):
            with open(fleet.path(USER_ACTIONS), 'rb') as f:
                todo.append(('/actions.py', f.read()))
        else:
            try:
                user = action_names(link.get_file('/actions.py').decode('utf-8', 'replace'))
            except FileNotFoundError:
                user = set()
        total = sum(len(d) for _, d in todo)
        with progress_bar(link, 'deploy %s' % dev_id, progress):
            if moved:
                clear_state(link)
            fed = None
            for path, data in todo:
                if fed is None or time.monotonic() - fed > FEED_S:
                    link.exec(FEED)
                    fed = time.monotonic()
                link.put_file(path, data)
            # MicroPython imports NAME.py before NAME.mpy: drop the other
            # form an earlier deploy (--no-compile, an older release) left
            stale = [p[:-4] + '.py' if p.endswith('.mpy') else p[:-3] + '.mpy'
                     for p, _ in todo if p.startswith('/lib/') and p.endswith(('.py', '.mpy'))
                     and not p.endswith('__init__.py')]
            link.exec('import os\nfor p in %r:\n try: os.remove(p)\n except OSError: pass\n' % stale)
        prov.commit(port)
        info = fleet.device(dev_id) or {'id': dev_id}
        info.update(user_actions=sorted(user), in_firmware=frozen)   # (memory_hint's in_firmware)
        fleet.save_device(info)
        return {'id': dev_id, 'files': len(todo), 'bytes': total, 'frozen': frozen, 'moved_from': moved,
                'note': files.small_heap_note(board, frozen), 'network': prov.extra.get('sync_port')}
    finally:
        if own:
            link.close()


# -- sync --------------------------------------------------------------------------

def sync(fleet, port, progress=True, link=None, now=None):
    """Merge both ways with one board; returns a report dict."""
    fleet.check_files()       # a bad fleet file stops the sync before the board or the folder changes
    own = link is None
    link = link or links.open_link(port, secret_for(fleet))
    seen = {}
    try:
        with progress_bar(link, 'sync %s' % port, progress):
            # opening the port (the interrupt, what the board printed) counts
            # when this sync opened it
            return _sync(fleet, port, link, now, 0 if own else link.bytes_sent + link.bytes_received, seen)
    except NotSporadic as e:
        raise UserError(str(e)) from e
    except (LinkError, recon.SyncError) as e:
        if 'board full' in str(e):
            m = re.search(r'keeps its (\d+) B', str(e))
            raise UserError('%s is full: its flash takes no more jobs (folding them in needs room for a second '
                            'copy of its job file); it keeps the %s it holds' % (port, '%s bytes of jobs' % m.group(1) if m else 'jobs'))
        raise UserError('sync with %s broke off: %s (nothing is lost: the next sync completes it)%s'
                        % (port, e, memory_hint(str(e), seen.get('heap'), seen.get('in_firmware'))))
    finally:
        if own:
            try:
                link.close()
            except LinkError:
                pass


def board_view(fleet, dev_id):
    """The fleet's lines as board dev_id needs them: everything but other
    boards' results of `each`/`who` jobs, which change nothing a board
    decides (they would make every board hold jobs x hosts results). The
    companion keeps them all; results of single-run jobs (any/one) travel,
    since they stop others running the instance, and so do a staged
    rollout's (waves=): a later wave decides from the earlier ones'.
    dev_id None: what every board needs (no board's each/who results; the
    broker's shared snapshot, companion/sync/mqtt.py)."""
    per_host = {j.id for j in fleet.jobs() if j.kind in ('each', 'who') and j.roll is None}

    def source():
        for l in fleet.lines():
            if (merging.is_result(l) and jobline.group(l) in per_host
                    and (dev_id is None or not merging.is_result(l, dev_id))):
                continue
            yield l
    return source


def fresh_heap(link):
    """Give the board a fresh heap before working with it (Link.soft_reset):
    a serial board's interrupted main loop's modules are freed (a 64 KB
    board cannot hold the loop and the sync at once), and main.py does not
    run until close(); a TCP board answers from its running loop."""
    link.soft_reset()


SYNCS_KEPT = 1000  # sync times a devices/ID.json keeps (about 11 KB)
GET_LINES = 128   # lines in one G answer at most (about 9 KB on the board)
PUT_ROOMY = 8192          # characters in one P for a board with ROOMY_HEAP or more
PUT_OWN_HEAP = 16384      # the same when the sync has that heap to itself (link.own_heap)
ROOMY_HEAP = 160 * 1024


def put_bytes_for(heap, own_heap=False):
    """Characters in one P request for a board with this heap (bytes, as its
    T answer says; None from older firmware). A request arrives as source
    text the board compiles, so it is held about three times over: an
    ESP8266's 38K heap takes 512 (bench/heap_sync.py). A roomy heap (a
    Pico's ~190 KB) takes PUT_ROOMY (streamed: held twice, not compiled):
    each P costs the board ~6 M instructions besides its lines; with that
    heap to itself (own_heap: a serial session, no loop beside it)
    PUT_OWN_HEAP: a first sync of 300 jobs in 2 P, not 3 of 8 KB or 7 of
    4 KB (docs/budgets.md#27; one of 32 KB left too little free for
    in.txt's limit: it compacted inside the P)."""
    if heap is not None and heap >= ROOMY_HEAP:
        return PUT_OWN_HEAP if own_heap else PUT_ROOMY
    if heap is None or heap >= 128 * 1024:
        return recon.REQ_MAX
    return 512 if heap < files.SMALL_HEAP else 1024


def memory_hint(error, heap, in_firmware=None):
    """What a board with a small heap that ran out of memory can do (in_firmware: deploy's word)."""
    if heap is None or heap >= files.SMALL_HEAP or 'memory' not in error.lower():
        return ''
    advice = files.ALREADY_IN_FIRMWARE if in_firmware else files.IN_FIRMWARE_ADVICE
    return '. This board has a %d KiB heap: %s' % (heap // 1024, advice)


def _sync(fleet, port, link, now, base=0, seen=None):
    fresh_heap(link)
    # 0. which fleet the board belongs to, before anything is exchanged
    check_fleet(fleet, link.call('F'), port)
    now = int(time.time()) if now is None else now
    # 1. the board's clock, from the companion's, over the board's own line
    answer = board_answer(link.call('T %d' % now), 'the time').split()
    dev_id, before = answer[0], answer[1]
    heap = int(answer[2]) if len(answer) > 2 and answer[2].isdigit() else None
    prev = fleet.device(dev_id) or {'id': dev_id}
    if seen is not None:
        seen.update(heap=heap, in_firmware=prev.get('in_firmware'))
    drift = None if before == '-' else int(before) - now
    was_complete = prev.get('complete', False)
    prev['complete'] = False          # until this sync has acknowledged the outbox
    fleet.save_device(prev)
    # 2. set reconciliation of the merged job-line files
    received = []
    flagged = []

    def local_receive(lines):
        # the merge parses (and reports bad lines); Fleet.receive checks
        # signatures and device MACs and quarantines what fails (FLEET/quar.txt)
        errors = []
        conflicts = []     # rule 4: the signed text of a job came back over an unsigned one
        refused = fleet.receive(lines, port, errors=errors, conflicts=conflicts, source=dev_id)
        for l, why in refused:
            flagged.append('refused from %s: %s: %s' % (dev_id, why, l[:80]))
        flagged.extend(errors)
        flagged.extend(c for c in conflicts if 'no signature' in c)
        bad = {l for l, _ in refused}
        received.extend(l for l in lines if l not in bad)
        return refused

    # a link that streams answers (serial, syncsrv.w) takes a whole node in
    # one pass over the board's file, however large
    get_lines = recondrv.WHOLE if link.stream_answers else GET_LINES

    vouch = [heap is not None and heap >= ROOMY_HEAP]

    def call(req):
        if vouch[0] and req[:2] == 'P ':
            vouch[0] = False       # (the records sort first: the first P has them)
            vouches.send(fleet, link, req)
        return link.call(req, stream=True)
    view = board_view(fleet, dev_id)
    held = prior.load(fleet, dev_id)     # what it held at its last equal sync (companion/sync/prior.py)
    stats = recondrv.reconcile(view, local_receive, call, get_lines=get_lines,
                            put_bytes=put_bytes_for(heap, link.own_heap), known=held and held.known)
    if stats['equal']:
        prior.save(fleet, dev_id, view)
    moved = stats['lines_in'] or stats['lines_out']
    new_results = []
    status = prev.get('status')
    if moved or not was_complete or status is None:
        # 3. the board's own results history (outbox), then acknowledge it.
        # Skipped when nothing moved after a complete sync: the board wrote
        # nothing since (its records are in the reconciled set), so an
        # unchanged pair costs T and S only.
        # O and C may compact (a rewrite of the board's whole job file): as
        # streamed answers, the board's keep-alives hold the link open
        got = outbox(fleet, dev_id, call, link.call, heap, flagged, fresh=lambda: fresh_heap(link))
        new_results = got['new'] + fleet.add_results([l for l in received if merging.is_result(l)])
        seg = got['upto']
        if stats['lines_out'] or seg:    # the board received lines or sealed its log
            board_answer(call('C'), 'compaction')
        status = board_status(link.call, lambda: fresh_heap(link))
    info = fleet.device(dev_id) or {'id': dev_id}
    wire = link.bytes_sent + link.bytes_received - base
    info.update({'port': port, 'last_sync': now, 'drift': drift, 'status': status, 'complete': True,
                 'bytes_last_sync': wire,
                 # the sections it ran in: a duplicate names each run's last sync (fleetcmd.duplicates)
                 'syncs': (info.get('syncs') or [])[1 - SYNCS_KEPT:] + [now]})
    fleet.save_device(info)
    store = (status or {}).get('store') or {}
    if store.get('full'):
        # it answered from what it holds, lines it could not fold in waiting
        # in in.txt: said in one line at every sync until it has room
        raise recon.SyncError('board full: keeps its %d B of jobs' % store.get('jobs_bytes', 0))
    refused = ['%s (%s)' % (l[:80], why) for l, why in stats.get('refused_remote', [])]
    return {'id': dev_id, 'drift': drift or 0, 'lines_sent': stats['lines_out'],
            'lines_received': stats['lines_in'], 'new_results': len(new_results),
            'bytes': wire, 'rounds': stats['rounds'],
            'refused': refused, 'flagged': flagged, 'status': status}


# -- the listening end: boards sync to the companion -------------------------------

def take(fleet, lines, source, log=None):
    """Lines a board (or a carrier: TCP, a broker) brought, into the fleet
    folder through its checks (Fleet.receive: signed batches, device MACs;
    refused lines quarantined) and the results into the history. Returns
    (refused [(line, reason)], new results)."""
    refused = fleet.receive(lines, source)
    bad = {l for l, _ in refused}
    res = [l for l in lines if merging.is_result(l) and l not in bad]
    new = fleet.add_results(res) if res else []
    if log:
        log('received %d lines%s' % (len(lines), ', refused %d' % len(refused) if refused else ''))
    return refused, new


def fleet_server(fleet, port, bind='0.0.0.0', log=None):
    """A TCP server (transport_tcp.make_server; run it with
    transport_tcp.serve) answering boards with the fleet's lines (the core's
    recon.Responder) and merging what they bring into the fleet."""
    from companion.link import tcp as transport_tcp
    fleet.check_files()     # a bad fleet file: one line before the server starts

    def receive(lines):
        return take(fleet, lines, 'tcp', log)[0]   # the reasons travel back to the board (recon)

    def secret_of(board_id):
        if fleet.insecure:
            return None
        try:
            return device_secret(fleet, board_id) or ''
        except Exception:   # an id that names no file this fleet could hold
            return ''

    return transport_tcp.make_server(recon.Responder(fleet.lines, receive).handle, secret_of, port, bind)
