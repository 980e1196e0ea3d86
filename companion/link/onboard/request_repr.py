# Board side of SerialLink.call for firmware whose sync server has no w (and
# for answers that may hold bytes 0x02-0x04): the repr of the answer on one
# line, so it crosses the line exactly whatever the board does to newlines.
# REQUEST is replaced as in request.py.
import sporadic.device.syncsrv as syncsrv
print(repr(syncsrv.h(REQUEST)))
