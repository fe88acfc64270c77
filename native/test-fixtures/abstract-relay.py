# Test helper: connects to the abstract Unix socket named argv[1] (no leading NUL; the name's
# exact length, which node:net cannot give: it pads abstract names to the whole sun_path) and
# relays stdin to it and it to stdout; exits when the socket is closed by the other side.
import os
import socket
import sys
import threading

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(b"\0" + sys.argv[1].encode())


def upstream():
    while True:
        data = os.read(0, 65536)
        if not data:
            s.shutdown(socket.SHUT_WR)
            return
        s.sendall(data)


threading.Thread(target=upstream, daemon=True).start()
try:
    while True:
        data = s.recv(65536)
        if not data:
            break
        os.write(1, data)
except OSError:
    pass
