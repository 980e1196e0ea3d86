# Board side of SerialLink.call: one raw-REPL execution per request, this
# text with REQUEST replaced by the request (a str literal, or _sp_req(...)
# of stream_in.py reading a streamed one). syncsrv.w writes STX, the answer
# as it makes it (a keep-alive byte 0x06 whenever it feeds its watchdog),
# ETX. An ImportError naming sporadic means the board does not run it.
import sporadic.device.syncsrv as syncsrv
syncsrv.w(REQUEST)
