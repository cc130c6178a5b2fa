"""Escape and limit attempts a hostile model would make from inside a sandbox.

One table, run against both drivers by test_sandbox_escape.sh:

  python3 escape_attempts.py steps DRIVER HOSTDIR   -> the session's input (JSON)
  python3 escape_attempts.py check DRIVER HOSTDIR   <  engine show --json
      prints "attempt | driver | result" rows; exit 1 if any attempt succeeded

Each attempt is (name, drivers, command run by sh -c in the sandbox, check).
A check gets the step's result {exit_code, stdout, stderr, error, ...} and
returns None when the sandbox held, or a string saying how it did not.
"""
import json
import os
import sys

DISK_MB = 32

# Looks at every descriptor above 2: its target, and whether it answers the
# Docker API. Then tries the whole escape: a root container binding HOSTDIR.
FD_PROBE = r'''
import os, socket, json
found = []
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    if fd <= 2:
        continue
    try:
        target = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        continue  # the listing's own descriptor, closed by now
    found.append("%d:%s" % (fd, target))
print("inherited:" + (",".join(found) or "none"))
def ask(fd, req):
    s = socket.socket(fileno=os.dup(fd))
    s.settimeout(3)
    s.sendall(req)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode("latin-1")
for entry in found:
    fd = int(entry.split(":")[0])
    try:
        ping = ask(fd, b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n")
    except OSError as e:
        continue
    if "OK" not in ping:
        continue
    print("docker-api-on-fd:%d" % fd)
    body = json.dumps({"Image": "engine-sandbox:latest", "User": "0", "Cmd": ["touch", "/h/pwned"],
                       "HostConfig": {"Binds": ["HOSTDIR:/h"], "NetworkMode": "none"}}).encode()
    r = ask(fd, b"POST /containers/create HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    cid = r.split('"Id":"')[1].split('"')[0] if '"Id":"' in r else ""
    print("created:" + cid)
    if cid:
        print(ask(fd, b"POST /containers/%s/start HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n"
                  % cid.encode()).split("\r\n")[0])
'''

def sh_py(src):
    return "python3 - <<'PYEOF'\n" + src + "\nPYEOF"

# ctypes syscall probe: prints the return value and errno
def syscall(nr, *args):
    a = ", ".join(str(x) for x in args)
    return sh_py("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "r = libc.syscall(%d%s)\nprint('ret=%%d errno=%%d' %% (r, ctypes.get_errno()))" % (nr, (", " + a) if a else ""))

def failed(r):
    return None if r.get("exit_code") != 0 else "the command succeeded: " + out(r)

def out(r):
    return ((r.get("stdout") or "") + " " + (r.get("stderr") or "")).strip()[:200]

def refused_syscall(r):
    s = r.get("stdout") or ""
    if "ret=-1" in s:
        return None
    return "the call was not refused: " + out(r)

def fd_scan(r):
    s = r.get("stdout") or ""
    if "inherited:none" in s:
        return None
    return "descriptors inherited: " + s.split("\n")[0][:200]

def docker_api(r):
    s = r.get("stdout") or ""
    if "docker-api-on-fd" in s:
        return "the Docker API answered through an inherited descriptor: " + s.replace("\n", " ")[:200]
    return None

def disk_full(r):
    if r.get("exit_code") == 0:
        return "wrote more than diskMb: " + out(r)
    if "No space left on device" not in out(r):
        return "failed, but not with ENOSPC: " + out(r)
    if not r.get("disk_full"):
        return "ENOSPC, but the result does not say disk_full: " + str(r.get("error"))
    return None

def enospc(r):
    if r.get("exit_code") == 0:
        return "wrote it all: " + out(r)
    if "No space left on device" not in out(r) and "Read-only file system" not in out(r):
        return "failed for another reason: " + out(r)
    return None

def sigdefault(r):
    s = (r.get("stdout") or "").strip()
    if not s.startswith("SigIgn:"):
        return "no signal mask: " + out(r)
    mask = int(s.split()[1], 16) & 0x7FFFFFFF  # 1-31; 32 and 33 are the C library's own
    return None if mask == 0 else "signals ignored on entry: " + s[:100]

ATTEMPTS = [
    ("inherited_fds", ("docker", "bwrap"), sh_py(FD_PROBE), fd_scan),
    ("docker_api_through_fd", ("docker", "bwrap"), sh_py(FD_PROBE), docker_api),
    ("docker_socket_path", ("docker", "bwrap"),
     sh_py("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/var/run/docker.sock')\nprint('connected')"),
     failed),
    ("no_ignored_signals", ("docker", "bwrap"), "grep SigIgn /proc/self/status", sigdefault),
    ("fill_workspace", ("docker", "bwrap"),
     "head -c %dM /dev/zero > /workspace/working/fill" % (DISK_MB + 16), disk_full),
    ("fill_output", ("docker", "bwrap"),
     "rm -f /workspace/working/fill; head -c %dM /dev/zero > /workspace/output/fill" % (DISK_MB + 16), disk_full),
    ("fill_tmp", ("docker", "bwrap"), "rm -f /workspace/output/fill; head -c 200M /dev/zero > /tmp/fill", enospc),
    ("fill_dev_shm", ("docker", "bwrap"), "rm -f /tmp/fill; head -c 200M /dev/zero > /dev/shm/fill", enospc),
    ("write_dev", ("bwrap",), "mkdir /dev/x", failed),
    ("write_workspace_root", ("docker", "bwrap"), "touch /workspace/x", failed),
    ("unshare_user", ("docker", "bwrap"), "unshare -r true", failed),
    ("unshare_mount", ("docker", "bwrap"), "unshare -rm mount -t tmpfs none /mnt", failed),
    ("mount_tmpfs", ("docker", "bwrap"), "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", failed),
    ("unshare_syscall", ("docker", "bwrap"), syscall(272, 0x10000000), refused_syscall),  # unshare(CLONE_NEWUSER)
    ("clone_newuser", ("bwrap",), syscall(56, 0x10000000 | 17, 0, 0, 0, 0), refused_syscall),
    ("ptrace_traceme", ("bwrap",), syscall(101, 0, 0, 0, 0), refused_syscall),
    ("keyctl", ("docker", "bwrap"), syscall(250, 0, -3, 0), refused_syscall),  # KEYCTL_GET_KEYRING_ID session
    ("bpf", ("docker", "bwrap"), syscall(321, 0, 0, 0), refused_syscall),
    ("perf_event_open", ("docker", "bwrap"), syscall(298, 0, 0, -1, -1, 0), refused_syscall),
    ("userfaultfd", ("docker", "bwrap"), syscall(323, 0), refused_syscall),
    ("io_uring_setup", ("bwrap",), syscall(425, 1, 0), refused_syscall),
    ("setns", ("docker", "bwrap"), syscall(308, 0, 0), refused_syscall),
    ("chroot", ("docker", "bwrap"), syscall(161, 0), refused_syscall),
    ("process_vm_readv", ("bwrap",), syscall(310, 1, 0, 0, 0, 0, 0), refused_syscall),
]


def steps(driver, hostdir):
    st = []
    for name, drivers, cmd, _ in ATTEMPTS:
        if driver in drivers:
            st.append({"op": "exec", "name": name, "cmd": cmd.replace("HOSTDIR", hostdir), "timeout": 30,
                       "max_output": 65536})
    return {"limits": {"memoryMb": 256, "pids": 128, "cpu": 1, "diskMb": DISK_MB}, "steps": st}


def check(driver, hostdir, shown):
    results = (shown.get("result") or {}).get("results") or {}
    bad = 0
    for name, drivers, _, fn in ATTEMPTS:
        if driver not in drivers:
            continue
        r = results.get(name)
        why = "no result" if r is None else fn(r)
        if name == "docker_api_through_fd" and os.path.exists(os.path.join(hostdir, "pwned")):
            why = "a root container wrote %s/pwned on the host" % hostdir
        bad += why is not None
        print("| %-24s | %-6s | %s |" % (name, driver, "held" if why is None else "ESCAPED: " + why))
    return bad


if __name__ == "__main__":
    mode, driver, hostdir = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "steps":
        json.dump(steps(driver, hostdir), sys.stdout)
    else:
        sys.exit(1 if check(driver, hostdir, json.load(sys.stdin)) else 0)
