/* child: children start with only the descriptors they are given. See child.h.
 *
 * posix_spawn (glibc: clone + exec, no fork of a big address space) with
 * posix_spawn_file_actions_addclosefrom_np closes every descriptor above the
 * child's own in the child, so a descriptor opened without O_CLOEXEC -- by
 * libcurl, by Lua's io.open, by a library we do not control -- still never
 * reaches a sandbox. This was a host root escape: a bubblewrap sandbox found
 * the engine's kept-alive Docker socket among its inherited descriptors. */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* argv[0] as a path: as given when it has a '/', else the first executable
 * match in PATH (the child's PATH when envp is given, like execvp in it). */
static int resolve(const char *file, char *const *envp, char *out, size_t outlen) {
  if (strchr(file, '/')) {
    if (strlen(file) >= outlen) return ENAMETOOLONG;
    strcpy(out, file);
    return 0;
  }
  const char *path = NULL;
  for (char *const *e = envp; e && *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  if (!envp) path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  size_t flen = strlen(file);
  for (const char *p = path;; p++) {
    const char *colon = strchr(p, ':');
    size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
    if (dlen == 0) dlen = 1, p = "."; /* an empty PATH entry is the current directory */
    if (dlen + 1 + flen < outlen) {
      memcpy(out, p, dlen);
      out[dlen] = '/';
      memcpy(out + dlen + 1, file, flen + 1);
      if (access(out, X_OK) == 0) return 0;
    }
    if (!colon) break;
    p = colon;
  }
  return ENOENT;
}

/* A memfd holding data, positioned at its start (the child reads it as fd 3). */
static int data_fd(const char *data, size_t len) {
  int fd = memfd_create("engine-fd3", MFD_CLOEXEC);
  if (fd < 0) return -1;
  for (size_t off = 0; off < len;) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)w;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int child_spawn(const child_opts *o, pid_t *pid) {
  char path[4096];
  int rc = resolve(o->argv[0], o->envp, path, sizeof path);
  if (rc) return rc;
  int extra = -1;
  if (o->fd3 && (extra = data_fd(o->fd3, o->fd3_len)) < 0) return errno ? errno : EIO;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  for (int i = 0; i < 3; i++) {
    if (o->fd[i] >= 0)
      posix_spawn_file_actions_adddup2(&fa, o->fd[i], i);
    else
      posix_spawn_file_actions_addopen(&fa, i, "/dev/null", O_RDWR, 0);
  }
  if (extra >= 0) posix_spawn_file_actions_adddup2(&fa, extra, 3);
  if (o->cwd) posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
  posix_spawn_file_actions_addclosefrom_np(&fa, extra >= 0 ? 4 : 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all); /* not the engine's SIG_IGN of SIGPIPE */
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (o->new_session) flags |= POSIX_SPAWN_SETSID;
  posix_spawnattr_setflags(&at, flags);
  rc = posix_spawn(pid, path, &fa, &at, o->argv, o->envp ? o->envp : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (extra >= 0) close(extra);
  return rc;
}

void child_cloexec_all(void) {
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  for (int fd = 3; fd < 65536; fd++) { /* kernels before 5.11 */
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
  }
}

/* ------------------------------------------------ the activity VM's Lua --- */

static int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

static int spawn_shell(const char *cmd, int fd0, int fd1, pid_t *pid) {
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  child_opts o = {.argv = argv, .fd = {fd0, fd1, 2}};
  return child_spawn(&o, pid);
}

/* os.execute(cmd), as Lua's, but the shell gets only fds 0-2. */
static int l_execute(lua_State *L) {
  const char *cmd = luaL_optstring(L, 1, NULL);
  if (!cmd) {
    lua_pushboolean(L, 1); /* a shell is available */
    return 1;
  }
  pid_t pid;
  int rc = spawn_shell(cmd, 0, 1, &pid);
  if (rc) {
    errno = rc;
    return luaL_fileresult(L, 0, NULL);
  }
  return luaL_execresult(L, wait_child(pid));
}

typedef struct popen_stream {
  luaL_Stream s; /* first: io's methods see a plain luaL_Stream */
  pid_t pid;
} popen_stream;

static int popen_close(lua_State *L) {
  popen_stream *p = (popen_stream *)luaL_checkudata(L, 1, LUA_FILEHANDLE);
  fclose(p->s.f);
  return luaL_execresult(L, wait_child(p->pid));
}

/* io.popen(cmd [, "r"|"w"]), as Lua's, but the shell gets only fds 0-2. */
static int l_popen(lua_State *L) {
  const char *cmd = luaL_checkstring(L, 1);
  const char *mode = luaL_optstring(L, 2, "r");
  luaL_argcheck(L, (mode[0] == 'r' || mode[0] == 'w') && mode[1] == 0, 2, "invalid mode");
  popen_stream *p = (popen_stream *)lua_newuserdatauv(L, sizeof *p, 0);
  p->s.closef = NULL; /* not yet a file */
  luaL_setmetatable(L, LUA_FILEHANDLE);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return luaL_fileresult(L, 0, cmd);
  int reading = mode[0] == 'r';
  int rc = reading ? spawn_shell(cmd, 0, fds[1], &p->pid) : spawn_shell(cmd, fds[0], 1, &p->pid);
  close(reading ? fds[1] : fds[0]);
  if (rc) {
    close(reading ? fds[0] : fds[1]);
    errno = rc;
    return luaL_fileresult(L, 0, cmd);
  }
  p->s.f = fdopen(reading ? fds[0] : fds[1], mode);
  if (!p->s.f) {
    int e = errno;
    close(reading ? fds[0] : fds[1]);
    wait_child(p->pid);
    errno = e;
    return luaL_fileresult(L, 0, cmd);
  }
  p->s.closef = popen_close;
  return 1;
}

/* Calls the original io function (upvalue 1) and marks the file it returns
 * (at result position upvalue 2) close-on-exec. */
static int l_cloexec_wrap(lua_State *L) {
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, LUA_MULTRET);
  int at = (int)lua_tointeger(L, lua_upvalueindex(2));
  luaL_Stream *s = lua_gettop(L) >= at ? luaL_testudata(L, at, LUA_FILEHANDLE) : NULL;
  if (s && s->closef && s->f) {
    int fd = fileno(s->f);
    if (fd >= 0) fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  }
  return lua_gettop(L);
}

static void wrap_io(lua_State *L, const char *name, int result_at) {
  lua_getfield(L, -1, name);
  lua_pushinteger(L, result_at);
  lua_pushcclosure(L, l_cloexec_wrap, 2);
  lua_setfield(L, -2, name);
}

void child_harden_lua(lua_State *L) {
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushcfunction(L, l_execute);
    lua_setfield(L, -2, "execute");
  }
  lua_pop(L, 1);
  if (lua_getglobal(L, "io") == LUA_TTABLE) {
    lua_pushcfunction(L, l_popen);
    lua_setfield(L, -2, "popen");
    wrap_io(L, "open", 1);
    wrap_io(L, "tmpfile", 1);
    wrap_io(L, "lines", 4); /* 5.4: iterator, nil, nil, the file */
  }
  lua_pop(L, 1);
}
