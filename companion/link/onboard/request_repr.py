# Board side of SerialLink.call for firmware whose sync server has no w (and
# for answers that may hold bytes 0x02-0x04): the repr of the answer on one
# line, so it crosses the line exactly whatever the board does to newlines.
# REQUEST is replaced as in request.py. One call a statement, the answer
# let go after: the board compiles this at each request, and a call nested
# in another (print(repr(h(...)))) grew its parser's rule stack to 1.5 KB
# in one piece, which a 64K heap's month hand-over then lacked
import sporadic.device.syncsrv as syncsrv
r = syncsrv.h(REQUEST)
print(repr(r))
del r
