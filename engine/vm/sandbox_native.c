/* sandbox_native: what the sandbox drivers (lua/sandbox.lua) need from C.
 *
 *   native.seccomp_program() -> the BPF program bubblewrap loads with
 *     `--seccomp 3` (proc.run's fd3): a deny list in the spirit of Docker's
 *     default profile. Kernel-wide or namespace-changing calls (mount and the
 *     new mount API, unshare, setns, clone with namespace flags, pivot_root,
 *     chroot), other processes' memory (ptrace, process_vm_*), the kernel
 *     keyring, bpf, perf, userfaultfd, io_uring, modules, kexec, reboot,
 *     clocks, swap, quotas and the like fail with EPERM; clone3 fails with
 *     ENOSYS so the C library falls back to clone, whose flags can be checked.
 *     Calls of another architecture (32-bit syscalls on x86_64) kill the
 *     process: the libseccomp default for a foreign ABI.
 *   native.sha256(s) -> 64 hex chars (sandbox names: one name per workflow id).
 *   native.disk_usage(path) -> size, free bytes of path's file system. */
#include "sandbox_native.h"

#include <errno.h>
#include <lauxlib.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util.h"

static const char *const DENIED[] = {
    "acct", "add_key", "bpf", "chroot", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module", "io_uring_enter",
    "io_uring_register", "io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
    "lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root", "process_madvise", "process_vm_readv",
    "process_vm_writev", "ptrace", "query_module", "quotactl", "quotactl_fd", "reboot", "request_key", "setns",
    "settimeofday", "stime", "swapoff", "swapon", "syslog", "sysfs", "_sysctl", "umount", "umount2", "unshare",
    "uselib", "userfaultfd", "ustat", "vm86", "vm86old", "fanotify_init", "lsm_set_self_attr",
};

static const unsigned long NS_FLAGS[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
                                         CLONE_NEWUTS, CLONE_NEWIPC,  CLONE_NEWCGROUP};

static char *program;
static size_t program_len;

/* Builds the program once; NULL with err set when libseccomp refuses. */
static const char *build_program(size_t *len, const char **err) {
  if (program) return *len = program_len, program;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return *err = "seccomp_init failed", NULL;
  int rc = 0;
  for (size_t i = 0; i < sizeof DENIED / sizeof *DENIED && rc == 0; i++) {
    int nr = seccomp_syscall_resolve_name(DENIED[i]);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue; /* not a call of this architecture */
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  for (size_t i = 0; i < sizeof NS_FLAGS / sizeof *NS_FLAGS && rc == 0; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS[i], NS_FLAGS[i]));
  int clone3 = seccomp_syscall_resolve_name("clone3");
  if (rc == 0 && clone3 >= 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0);
  int fd = rc == 0 ? memfd_create("engine-seccomp", MFD_CLOEXEC) : -1;
  if (fd >= 0 && seccomp_export_bpf(ctx, fd) == 0) {
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = n > 0 ? malloc((size_t)n) : NULL; /* NULL: the sandbox is refused, named below */
    if (buf && pread(fd, buf, (size_t)n, 0) == n) {
      program = buf;
      program_len = (size_t)n;
    } else {
      free(buf);
    }
  }
  if (fd >= 0) close(fd);
  seccomp_release(ctx);
  if (!program) return *err = "cannot build the seccomp program", NULL;
  return *len = program_len, program;
}

static int l_seccomp_program(lua_State *L) {
  size_t len;
  const char *err = NULL;
  const char *p = build_program(&len, &err);
  if (!p) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushlstring(L, p, len);
  return 1;
}

static int l_sha256(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  char hex[65];
  util_sha256_hex(s, len, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int l_disk_usage(lua_State *L) {
  struct statvfs v;
  if (statvfs(luaL_checkstring(L, 1), &v) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushinteger(L, (lua_Integer)(v.f_blocks * v.f_frsize));
  lua_pushinteger(L, (lua_Integer)(v.f_bavail * v.f_frsize));
  return 2;
}

int luaopen_engine_sandbox_native(lua_State *L) {
  static const luaL_Reg lib[] = {{"seccomp_program", l_seccomp_program},
                                 {"sha256", l_sha256},
                                 {"disk_usage", l_disk_usage},
                                 {NULL, NULL}};
  luaL_newlib(L, lib);
  return 1;
}
