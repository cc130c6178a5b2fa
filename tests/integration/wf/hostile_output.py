# Run inside the sandbox by tests/integration/test_artifacts.sh (through the
# agent's shell tool): leaves in /workspace/output/ everything a collection of
# artifacts must report instead of losing: a 40-deep directory chain, a path
# just over 4 KiB, a path of 250 KB, a symlink (with an escape sequence in its
# name), a FIFO, a unix socket, a 9 MiB file and 5,000 small files, beside the
# one report that must be saved.
import os
import socket

out = "/workspace/output"
os.chdir(out)
with open("report.md", "w") as f:
    f.write("the report\n")

chain = os.path.join("deep", *["d"] * 40)
os.makedirs(chain)
with open(os.path.join(chain, "bottom.txt"), "w") as f:
    f.write("at the bottom\n")


def nest(top, levels, leaf):
    """levels directories of 250-byte names under top, made with relative
    chdirs (a path that long cannot be passed to one system call)."""
    os.chdir(out)
    os.mkdir(top)
    os.chdir(top)
    for _ in range(levels):
        os.mkdir("L" * 250)
        os.chdir("L" * 250)
    with open(leaf, "w") as f:
        f.write("far away\n")
    os.chdir(out)


nest("long", 17, "end.txt")     # ~4.3 KB of path
nest("huge", 1000, "lost.txt")  # ~250 KB of path
try:                            # a 10 MB name: the kernel refuses it
    open("n" * 10_000_000, "w")
except OSError as e:
    print("10 MB name refused:", e.strerror)

os.symlink("/etc/passwd", "link\x1b[2J")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("sock")
s.close()
with open("big.bin", "wb") as f:
    f.write(b"b" * (9 * 1024 * 1024))

os.mkdir("many")
name = "m" * 200
for i in range(5000):
    with open("many/%s-%04d.txt" % (name, i), "w") as f:
        f.write("x")
print("made the hostile output")
