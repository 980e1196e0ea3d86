"""The fleet on an MQTT broker (docs/mqtt.md): `companion sync mqtt://...`
(once) and `companion serve --mqtt URL` (a sync every few seconds).

One sync: subscribe (again) to the fleet's topics, so the broker sends its
retained snapshot and what boards published since the last visit; take all
of it into the fleet folder through the checks every link uses
(syncer.take: Fleet.receive's signed batches and device MACs, refused
lines quarantined and reported); acknowledge; publish the fleet's snapshot
where it differs from the retained one (and clear retained messages the
snapshot no longer has). Two fleet folders on one broker converge: each
takes the other's snapshot and publishes the union.

The snapshot (`snapshot(fleet)`): what every board needs
(syncer.board_view(fleet, None)), one retained message per batch SEQ
(`f/00000012`: the .b record and the live lines it covers, so a board
checks them in one delivery) and the lines that need no batch by digest
(`f/u0`..`f/uf`); a message over PART characters continues in NAME.1,
NAME.2 ... (the board takes one message at a time: its heap bounds it).
"""
import hashlib
import os
import socket
import time

from sporadic.core import batch
from companion.sync import syncer
from companion.errors import UserError

PART = 8192          # characters of one retained message (a board's heap takes one at a time)


def topic_of(fleet, cfg):
    """The fleet's topic prefix: cfg's (--mqtt-topic), else sporadic/ + the
    fleet key's id (provisioning gives the boards the same)."""
    if cfg.get('topic'):
        return cfg['topic']
    from companion.fleet import provision
    from companion.fleet.board_keys import read_fleet_key
    key = read_fleet_key(fleet)
    if key is None:
        raise UserError('this fleet has no fleet key (keys/peer) yet: deploy a board first, '
                        'or give --mqtt-topic')
    return provision.fleet_topic(key)


def client_id(fleet):
    """A fixed client id per fleet folder on this machine (two clones of a
    fleet are two clients with a session each)."""
    h = hashlib.sha256(('%s %s' % (socket.gethostname(), os.path.abspath(fleet.dir))).encode()).hexdigest()
    return 'sporadic-companion-' + h[:12]


def _parts(name, text, out):
    # NAME, NAME.1, ... each at most PART characters, whole lines
    lines = text.split('\n')
    buf = []
    n = 0
    k = 0
    for l in lines:
        if not l:
            continue
        if buf and n + len(l) + 1 > PART:
            out[name if k == 0 else '%s.%d' % (name, k)] = '\n'.join(buf) + '\n'
            k += 1
            buf = []
            n = 0
        buf.append(l)
        n += len(l) + 1
    if buf:
        out[name if k == 0 else '%s.%d' % (name, k)] = '\n'.join(buf) + '\n'


def snapshot(fleet):
    """{name: text}: the retained messages that hold the fleet's state."""
    lines = list(syncer.board_view(fleet, None)())
    recs = {}        # SEQ -> its .b/.k records
    cover = {}       # line digest -> newest SEQ whose batch covers it
    for l in lines:
        if l[:3] == '.b ':
            try:
                seq, _, digests, _, _ = batch.parse_batch(l)
            except ValueError:
                continue
            recs.setdefault(seq, []).append(l)
            for i in range(0, len(digests), batch.DIGEST):
                d = digests[i:i + batch.DIGEST]
                if cover.get(d, 0) < seq:
                    cover[d] = seq
        elif l[:3] == '.k ':
            try:
                seq = batch.parse_key(l)[0]
            except ValueError:
                continue
            recs.setdefault(seq, []).append(l)
    groups = {}
    for l in lines:
        if l[:3] in ('.b ', '.k '):
            continue
        s = None
        if not fleet.insecure and batch.needs_batch(l):
            s = cover.get(batch.line_digest(l))
        name = '%08d' % s if s else 'u' + hashlib.sha256(l.encode()).hexdigest()[0]
        groups.setdefault(name, []).append(l)
    for seq, rs in recs.items():
        name = '%08d' % seq
        if name in groups or rs[0][:3] == '.k ':
            groups[name] = rs + groups.get(name, [])
    out = {}
    for name in sorted(groups):
        _parts(name, '\n'.join(groups[name]), out)
    return out


def _text(payload):
    return payload.decode('utf-8', 'replace')


def sync(fleet, cfg, log=None, now=None):
    """One visit to the broker; returns a report dict. now: the
    companion's clock (a refusal report's contact time)."""
    from companion.link.mqtt import BrokerLink
    fleet.check_files()
    pre = topic_of(fleet, cfg)
    link = BrokerLink(cfg, client_id(fleet))
    link.open([pre + '/f/#', pre + '/r/+', pre + '/d/+', pre + '/q/+'])
    try:
        msgs = link.collect()
        retained = {}
        fleet_msgs = []
        lines = []
        reports = []
        hosts = set()
        for m in msgs:
            rest = m.topic[len(pre) + 1:] if m.topic.startswith(pre + '/') else ''
            if rest[:2] == 'f/':
                if m.retain:
                    retained[rest[2:]] = m.payload
                fleet_msgs.append((rest[2:], m.payload))
            elif rest[:2] in ('r/', 'd/'):
                hosts.add(rest[2:])
                lines.extend(l for l in _text(m.payload).split('\n') if l.strip())
            elif rest[:2] == 'q/':
                for l in _text(m.payload).split('\n'):
                    why, tab, line = l.partition('\t')
                    if tab:
                        reports.append((rest[2:], line, why))
        # the fleet's lines first, batches by SEQ (as a board takes them), then the boards'
        fleet_lines = []
        for _, p in sorted(fleet_msgs, key=lambda x: x[0]):
            fleet_lines.extend(l for l in _text(p).split('\n') if l.strip())
        got = fleet_lines + lines
        refused, new = syncer.take(fleet, got, 'mqtt') if got else ([], [])
        for host in sorted({h for h, _, _ in reports}):
            # what a board refused, in the fleet's quarantine under its name (status shows it)
            fleet.quarantine([(line, why) for h, line, why in reports if h == host], 'reported by ' + host)
        note_contacts(fleet, lines, refused, {h for h, _, _ in reports}, int(time.time() if now is None else now))
        link.ack(msgs)          # the folder holds them (or quarantined them)
        snap = snapshot(fleet)
        todo = [(name, text) for name, text in snap.items() if retained.get(name) != text.encode()]
        published = len(todo)
        gone = [(name, b'') for name, p in retained.items() if name not in snap and p]
        cleared = len(gone)
        link.publish_all([(pre + '/f/' + name, text) for name, text in todo + gone], retain=True)
    finally:
        link.close()
    rep = {'broker': link.url, 'topic': pre, 'messages': len(msgs), 'lines_received': len(got),
           'boards': sorted(hosts), 'new_results': len(new), 'published': published, 'cleared': cleared,
           'snapshot': len(snap), 'refused': ['%s (%s)' % (l[:80], why) for l, why in refused],
           'reports': ['%s refused %s: %s' % (h, why, line[:80]) for h, line, why in reports]}
    if log:
        log(summary(rep))
        for q in rep['refused']:
            log('refused from the broker: %s' % q)
        for q in rep['reports']:
            log('reported: %s' % q)
    return rep


def note_contacts(fleet, lines, refused, reporters, now):
    """devices/ID.json broker_contact: the time of the newest record of
    board ID taken through the broker (its own clock's time, no later than
    now; a line refused does not count, a replayed one is as old as it
    was), or now for a refusal report on PRE/q/ID (unsigned: as the report
    itself, it is the board's word). status shows it (queries.status_rows)."""
    bad = {l for l, _ in refused}
    seen = {}
    for l in lines:
        f = l.split(None, 5)
        if len(f) > 4 and f[1] == 'r' and l not in bad and f[4].isdigit():
            seen[f[2]] = max(seen.get(f[2], 0), min(int(f[4]), now))
    for h in reporters:
        seen[h] = now
    for h, t in sorted(seen.items()):
        try:
            d = fleet.device(h)
        except UserError:
            continue        # not a host id
        if d is not None and t > (d.get('broker_contact') or 0):
            d['broker_contact'] = t
            fleet.save_device(d)


def summary(rep):
    return ('synced %s (%s): received %d line(s) in %d message(s) from %s, %d new result(s); '
            'published %d of %d snapshot message(s), cleared %d'
            % (rep['broker'], rep['topic'], rep['lines_received'], rep['messages'],
               ', '.join(rep['boards']) or 'no board', rep['new_results'], rep['published'],
               rep['snapshot'], rep['cleared']))


def serve(fleet, cfg, every=5.0, until=None, log=print):
    """`companion serve --mqtt URL`: a sync every `every` seconds (the
    session keeps what boards publish in between) until `until`."""
    while True:
        try:
            sync(fleet, cfg, log)
        except UserError as e:
            if log:
                log(str(e))
        now = time.time()
        if until is not None and now + every > until:
            return
        time.sleep(every)
