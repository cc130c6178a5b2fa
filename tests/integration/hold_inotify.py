"""Takes every inotify instance the calling user may have (fs.inotify.
max_user_instances) and holds them until killed: what a machine whose other
programs used them all up looks like to the engine. Writes the count to argv[1]."""
import ctypes
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        break
    fds.append(fd)
with open(sys.argv[1], "w") as f:
    f.write(str(len(fds)))
time.sleep(3600)
