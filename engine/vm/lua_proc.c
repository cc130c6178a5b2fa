/* lua_proc: `local proc = require "proc"` in activities -- runs a program on
 * the loop (child_spawn + a pidfd), without blocking the engine.
 *
 *   local r = proc.run{argv = {...}, env = {"K=V", ...} (default: empty),
 *                      cwd = , stdin = "data", timeout = seconds (default 60),
 *                      max_output = bytes kept of stdout+stderr (default 1 MiB),
 *                      fd3 = "data" (readable on the program's fd 3, e.g.
 *                      bwrap's --seccomp 3)}
 *   -- r.exit_code, r.signal, r.stdout, r.stderr, r.truncated, r.output_bytes,
 *   -- r.timed_out
 *
 *   local h = proc.open{argv = {...}, env = {...}, cwd = , max_buffer = bytes}
 *   -- a program that keeps running while the activity talks to it (an MCP
 *   -- server on stdio): h:write(data) queues bytes for its stdin (true, or
 *   -- nil and why once the pipe broke); h:read(timeout) yields until stdout
 *   -- has bytes (a string of everything unread), or returns nil, "eof" |
 *   -- "timeout"; h:stderr() is the last 4 KiB of its stderr; h:close() kills
 *   -- it and returns its exit code (also done by __gc and __close, and when
 *   -- the activity is abandoned while it waits). At most max_buffer (default
 *   -- 1 MiB) unread stdout bytes are held: past that the pipe is not read
 *   -- until h:read takes them, so a flood costs a window, not the flood.
 *
 * The program runs in a session and process group of its own; at the time
 * limit, or when the activity is abandoned, the whole group gets SIGKILL.
 * Output past max_output is counted and dropped, so a flood costs max_output.
 * The program gets only fds 0-2 (and 3 when fd3 is given): child.c. Its exit
 * is watched through a pidfd on the loop, so no SIGCHLD handler is needed. */
#include "lua_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actvm.h"
#include "child.h"
#include "util.h"

typedef struct proc {
  uv_poll_t exit_watch; /* on the pidfd: readable once the program has exited */
  int pidfd;
  pid_t pid;
  uv_pipe_t out, err, in;
  uv_timer_t timer;
  uv_write_t write_req;
  char *stdin_data;
  int open_handles;
  int exited, out_open, err_open, timed_out, abandoned;
  int64_t exit_code;
  int term_signal;
  capped_output o;
  act_call *ac;
  int resumed;
} proc;

static void maybe_free(proc *p) {
  if (p->open_handles == 0) {
    capped_free(&p->o);
    free(p->stdin_data);
    if (p->pidfd >= 0) close(p->pidfd);
    free(p);
  }
}

static void on_close(uv_handle_t *h) {
  proc *p = h->data;
  p->open_handles--;
  maybe_free(p);
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_close);
}

/* Only before the program is reaped: after that its pid could be reused. */
static void kill_group(proc *p) {
  if (!p->exited && p->pid > 0) kill(-p->pid, SIGKILL);
}

/* When the program has exited and both pipes are drained, hand the result
 * to the waiting activity. */
static void maybe_finish(proc *p) {
  if (!p->exited || p->out_open || p->err_open || p->resumed) return;
  p->resumed = 1;
  uv_timer_stop(&p->timer);
  close_handle((uv_handle_t *)&p->timer);
  if (p->abandoned || !p->ac) return;
  act_call *ac = p->ac;
  p->ac = NULL;
  lua_State *co = actvm_thread(ac);
  lua_createtable(co, 0, 8);
  lua_pushinteger(co, p->exit_code);
  lua_setfield(co, -2, "exit_code");
  lua_pushinteger(co, p->term_signal);
  lua_setfield(co, -2, "signal");
  lua_pushlstring(co, p->o.out.p ? p->o.out.p : "", p->o.out.n);
  lua_setfield(co, -2, "stdout");
  lua_pushlstring(co, p->o.err.p ? p->o.err.p : "", p->o.err.n);
  lua_setfield(co, -2, "stderr");
  lua_pushboolean(co, p->o.truncated);
  lua_setfield(co, -2, "truncated");
  lua_pushinteger(co, (lua_Integer)p->o.total);
  lua_setfield(co, -2, "output_bytes");
  lua_pushboolean(co, p->timed_out);
  lua_setfield(co, -2, "timed_out");
  actvm_resume(ac, 1);
}

static void on_exit_cb(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  proc *p = h->data;
  /* leftovers of the group (background jobs) do not outlive the program */
  kill(-p->pid, SIGKILL);
  int st = 0;
  pid_t r;
  while ((r = waitpid(p->pid, &st, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) return; /* not yet (a spurious wake-up) */
  p->exited = 1;
  p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  p->term_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  if (p->term_signal) p->exit_code = 128 + p->term_signal;
  uv_poll_stop(h);
  close_handle((uv_handle_t *)h);
  maybe_finish(p);
}

/* Out of memory, an empty buffer: libuv then reports UV_ENOBUFS to on_read,
 * which ends this pipe (the output is marked truncated), not the engine. */
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(suggested);
  buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  proc *p = s->data;
  int is_out = s == (uv_stream_t *)&p->out;
  if (nread > 0) capped_add(&p->o, is_out ? 1 : 2, buf->base, (size_t)nread);
  if (nread == UV_ENOBUFS) p->o.truncated = 1;
  free(buf->base);
  if (nread < 0) {
    if (is_out) p->out_open = 0;
    else p->err_open = 0;
    close_handle((uv_handle_t *)s);
    maybe_finish(p);
  }
}

static void on_timeout(uv_timer_t *t) {
  proc *p = t->data;
  p->timed_out = 1;
  kill_group(p);
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  proc *p = w->data;
  close_handle((uv_handle_t *)&p->in);
}

/* The activity was abandoned: kill the program; free once everything closed. */
static void cancel_op(void *op) {
  proc *p = op;
  p->abandoned = 1;
  p->ac = NULL;
  kill_group(p);
}

/* Puts the program on the loop: its pipes (fds: the engine's ends of stdout,
 * stderr and stdin, -1 for none), its exit watch and its time limit. Returns
 * 0 or a libuv error. Each handle initialised counts in open_handles (they
 * are initialised in the order out, err, in, timer, exit_watch, and each
 * closes with on_close); each fd the loop took over becomes -1. */
static int watch(proc *p, uv_loop_t *loop, int fds[3], uint64_t timeout_ms) {
  uv_pipe_t *pipes[3] = {&p->out, &p->err, &p->in};
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++)
    if ((rc = uv_pipe_init(loop, pipes[i], 0)) == 0) p->open_handles++;
  if (rc == 0 && (rc = uv_timer_init(loop, &p->timer)) == 0) p->open_handles++;
  if (rc == 0 && (rc = uv_poll_init(loop, &p->exit_watch, p->pidfd)) == 0) p->open_handles++;
  for (int i = 0; i < 3 && rc == 0; i++)
    if (fds[i] >= 0 && (rc = uv_pipe_open(pipes[i], fds[i])) == 0) fds[i] = -1; /* closed with its handle now */
  if (rc == 0) rc = uv_timer_start(&p->timer, on_timeout, timeout_ms, 0);
  if (rc == 0) rc = uv_poll_start(&p->exit_watch, UV_READABLE, on_exit_cb);
  p->out_open = p->err_open = 1;
  if (rc == 0) rc = uv_read_start((uv_stream_t *)&p->out, alloc_cb, on_read);
  if (rc == 0) rc = uv_read_start((uv_stream_t *)&p->err, alloc_cb, on_read);
  return rc;
}

/* After watch() failed: nothing watches the program, so it must not run
 * on. Kills and reaps it, closes what was opened; the proc is freed once
 * its handles have closed (no callback of them runs before). */
static void unwatch(proc *p, int fds[3]) {
  uv_handle_t *handles[5] = {(uv_handle_t *)&p->out, (uv_handle_t *)&p->err, (uv_handle_t *)&p->in,
                             (uv_handle_t *)&p->timer, (uv_handle_t *)&p->exit_watch};
  kill(-p->pid, SIGKILL);
  while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {
  }
  p->exited = 1;
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  int n = p->open_handles;
  if (n == 0) maybe_free(p);
  for (int i = 0; i < n; i++) close_handle(handles[i]);
}

static int spawn_error(lua_State *L, const char *prog, const char *why) {
  lua_newtable(L);
  lua_pushliteral(L, "SpawnError");
  lua_setfield(L, -2, "type");
  lua_pushfstring(L, "cannot run %s: %s", prog, why);
  lua_setfield(L, -2, "message");
  return lua_error(L);
}

/* Reads argv, env and cwd of the options table at index 1 into argv (256
 * slots) and env (128 slots), both NULL-terminated; the strings stay on the
 * Lua stack (the caller keeps it until the program has started). Returns
 * cwd (NULL: the engine's). Raises on a bad argv. */
static const char *command_of(lua_State *L, const char *fn, char **argv, char **env) {
  int argc = 0, envc = 0;
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE) luaL_error(L, "%s: argv (a list) is required", fn);
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  if (n < 1 || n > 250) luaL_error(L, "%s: argv needs 1 to 250 items", fn);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    argv[argc++] = (char *)luaL_checkstring(L, -1);
    lua_pop(L, 1);
  }
  argv[argc] = NULL;
  if (lua_getfield(L, 1, "env") == LUA_TTABLE) {
    lua_Integer m = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= m && envc < 126; i++) {
      lua_rawgeti(L, -1, i);
      env[envc++] = (char *)luaL_checkstring(L, -1);
      lua_pop(L, 1);
    }
  }
  env[envc] = NULL;
  lua_getfield(L, 1, "cwd");
  return luaL_optstring(L, -1, NULL);
}

static int l_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  act_call *ac = actvm_current(L);
  if (!ac) return luaL_error(L, "proc.run must be called inside an activity");
  if (!lua_isyieldable(L)) return luaL_error(L, "proc.run cannot wait here (not yieldable)");
  /* argv and env live on the Lua stack until the program has started */
  char *argv[256], *env[128];
  const char *cwd = command_of(L, "proc.run", argv, env);
  lua_getfield(L, 1, "timeout");
  double timeout = luaL_optnumber(L, -1, 60);
  char why[160]; /* inf or NaN must not reach the integer of a timer */
  if (util_check_seconds(timeout, "proc.run: timeout", why, sizeof why) != 0) return luaL_error(L, "%s", why);
  lua_getfield(L, 1, "max_output");
  lua_Integer max = luaL_optinteger(L, -1, 1 << 20);
  lua_getfield(L, 1, "stdin");
  size_t inlen = 0;
  const char *indata = luaL_optlstring(L, -1, NULL, &inlen);

  lua_getfield(L, 1, "fd3");
  size_t fd3len = 0;
  const char *fd3 = luaL_optlstring(L, -1, NULL, &fd3len);

  /* pipes: the engine's ends close-on-exec; the child's become its 0-2 */
  int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 || (indata && pipe2(pi, O_CLOEXEC) != 0)) {
    int e = errno;
    int all[] = {po[0], po[1], pe[0], pe[1], pi[0], pi[1]};
    for (int i = 0; i < 6; i++)
      if (all[i] >= 0) close(all[i]);
    return spawn_error(L, argv[0], strerror(e));
  }
  child_opts so = {.argv = argv, .envp = env, .cwd = cwd, .fd = {pi[0], po[1], pe[1]}, .fd3 = fd3,
                   .fd3_len = fd3len, .new_session = 1}; /* a process group of its own, killed as one */
  pid_t pid = 0;
  int rc = child_spawn(&so, &pid);
  int pidfd = rc == 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
  int pidfd_errno = errno;
  close(po[1]);
  close(pe[1]);
  if (pi[0] >= 0) close(pi[0]);
  if (rc != 0 || pidfd < 0) {
    if (rc == 0) { /* started, but we cannot watch it: do not leave it running */
      kill(-pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
    close(po[0]);
    close(pe[0]);
    if (pi[1] >= 0) close(pi[1]);
    return spawn_error(L, argv[0], rc ? strerror(rc) : strerror(pidfd_errno));
  }

  uv_loop_t *loop = actvm_loop_of(L);
  proc *p = util_xcalloc(1, sizeof *p);
  p->o.max = max > 0 ? (size_t)max : 0;
  p->pid = pid;
  p->pidfd = pidfd;
  p->exit_watch.data = p->out.data = p->err.data = p->in.data = p->timer.data = p->write_req.data = p;
  int fds[3] = {po[0], pe[0], pi[1]};
  int rc_watch = watch(p, loop, fds, (uint64_t)(timeout > 0 ? timeout * 1000.0 : 0));
  if (rc_watch != 0) {
    unwatch(p, fds);
    return spawn_error(L, argv[0], uv_strerror(rc_watch));
  }
  if (indata) {
    p->stdin_data = util_xmalloc(inlen + 1);
    memcpy(p->stdin_data, indata, inlen);
    uv_buf_t b = uv_buf_init(p->stdin_data, (unsigned)inlen);
    if (uv_write(&p->write_req, (uv_stream_t *)&p->in, &b, 1, on_written) != 0) close_handle((uv_handle_t *)&p->in);
  } else {
    close_handle((uv_handle_t *)&p->in);
  }
  p->ac = ac;
  actvm_set_pending(ac, cancel_op, p);
  return lua_yield(L, 0);
}

/* ------------------------------------------------------ proc.open --- */

#define PIPE_MT "engine.proc_pipe"
#define ERR_TAIL 4096

typedef struct pipe_proc {
  uv_poll_t exit_watch;
  int pidfd;
  pid_t pid;
  uv_pipe_t out, err, in;
  uv_timer_t timer; /* a read's time limit */
  int open_handles;
  int exited, closed, out_eof, err_eof, paused, write_failed;
  int64_t exit_code;
  char *buf; /* unread stdout */
  size_t n, cap, max;
  char err_tail[ERR_TAIL];
  size_t err_n;
  act_call *ac; /* the attempt waiting in h:read, or NULL */
} pipe_proc;

typedef struct pipe_write {
  uv_write_t req;
  pipe_proc *p;
  char data[];
} pipe_write;

static void pp_maybe_free(pipe_proc *p) {
  if (p->open_handles > 0) return;
  if (p->pidfd >= 0) close(p->pidfd);
  free(p->buf);
  free(p);
}

static void pp_on_close(uv_handle_t *h) {
  pipe_proc *p = h->data;
  p->open_handles--;
  pp_maybe_free(p);
}

static void pp_close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, pp_on_close);
}

static void pp_reap(pipe_proc *p, int block) {
  if (p->exited) return;
  int st = 0;
  pid_t r;
  while ((r = waitpid(p->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) return;
  p->exited = 1;
  p->exit_code = r < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Hands the waiting read its answer: the unread bytes, or nil and why. */
static void pp_deliver(pipe_proc *p, const char *why) {
  act_call *ac = p->ac;
  if (!ac) return;
  p->ac = NULL;
  uv_timer_stop(&p->timer);
  lua_State *co = actvm_thread(ac);
  int nret = 1;
  if (p->n > 0) {
    lua_pushlstring(co, p->buf, p->n);
    p->n = 0;
  } else {
    lua_pushnil(co);
    lua_pushstring(co, why);
    nret = 2;
  }
  actvm_resume(ac, nret);
}

static void pp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(suggested);
  buf->len = buf->base ? suggested : 0;
}

static void pp_on_out(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  pipe_proc *p = s->data;
  if (nread > 0) {
    size_t k = (size_t)nread;
    if (p->n + k > p->cap) {
      size_t cap = p->cap ? p->cap : 65536;
      while (cap < p->n + k) cap *= 2;
      p->buf = util_xrealloc(p->buf, cap);
      p->cap = cap;
    }
    memcpy(p->buf + p->n, buf->base, k);
    p->n += k;
    /* backpressure: the program blocks on a full pipe until h:read takes these */
    if (p->n >= p->max && !p->paused) {
      uv_read_stop(s);
      p->paused = 1;
    }
  }
  free(buf->base);
  if (nread < 0) {
    p->out_eof = 1;
    uv_read_stop(s);
  }
  /* the end waits for stderr's: the last words of a crash are read first */
  if (p->n > 0 || (p->out_eof && p->err_eof)) pp_deliver(p, "eof");
}

static void pp_on_err(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  pipe_proc *p = s->data;
  if (nread > 0) { /* keep the tail: the last words of a crash are at the end */
    size_t k = (size_t)nread;
    const char *d = buf->base;
    if (k >= ERR_TAIL) {
      memcpy(p->err_tail, d + k - ERR_TAIL, ERR_TAIL);
      p->err_n = ERR_TAIL;
    } else {
      if (p->err_n + k > ERR_TAIL) {
        size_t drop = p->err_n + k - ERR_TAIL;
        memmove(p->err_tail, p->err_tail + drop, p->err_n - drop);
        p->err_n -= drop;
      }
      memcpy(p->err_tail + p->err_n, d, k);
      p->err_n += k;
    }
  }
  free(buf->base);
  if (nread < 0) {
    p->err_eof = 1;
    uv_read_stop(s);
    if (p->out_eof && p->n == 0) pp_deliver(p, "eof");
  }
}

static void pp_on_exit(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  pipe_proc *p = h->data;
  kill(-p->pid, SIGKILL); /* leftovers of its group do not outlive it */
  pp_reap(p, 0);
  if (p->exited) uv_poll_stop(h);
}

static void pp_on_timeout(uv_timer_t *t) { pp_deliver(t->data, "timeout"); }

/* The attempt was abandoned while reading: the program goes with it. */
static void pp_cancel(void *op) {
  pipe_proc *p = op;
  p->ac = NULL;
  uv_timer_stop(&p->timer);
  if (!p->exited) kill(-p->pid, SIGKILL);
}

/* Kills and reaps the program, closes its pipes; p is freed once they have
 * closed. Idempotent. */
static void pp_close(pipe_proc *p) {
  if (p->closed) return;
  p->closed = 1;
  p->ac = NULL;
  if (!p->exited) {
    kill(-p->pid, SIGKILL);
    pp_reap(p, 1); /* after SIGKILL: at once */
  }
  uv_handle_t *hs[5] = {(uv_handle_t *)&p->out, (uv_handle_t *)&p->err, (uv_handle_t *)&p->in,
                        (uv_handle_t *)&p->timer, (uv_handle_t *)&p->exit_watch};
  int n = p->open_handles;
  for (int i = 0; i < n; i++) pp_close_handle(hs[i]);
  if (n == 0) pp_maybe_free(p);
}

static pipe_proc *check_pipe(lua_State *L) {
  pipe_proc **pp = luaL_checkudata(L, 1, PIPE_MT);
  if (!*pp) luaL_error(L, "the program's pipe is closed");
  return *pp;
}

static void pp_on_written(uv_write_t *w, int status) {
  pipe_write *pw = (pipe_write *)w;
  if (status < 0) pw->p->write_failed = 1;
  free(pw);
}

static int l_pipe_write(lua_State *L) {
  pipe_proc *p = check_pipe(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  if (p->write_failed || p->exited) {
    lua_pushnil(L);
    lua_pushstring(L, p->exited ? "the program has exited" : "its stdin is closed");
    return 2;
  }
  pipe_write *pw = util_xmalloc(sizeof *pw + len + 1);
  pw->p = p;
  memcpy(pw->data, data, len);
  uv_buf_t b = uv_buf_init(pw->data, (unsigned)len);
  int rc = uv_write(&pw->req, (uv_stream_t *)&p->in, &b, 1, pp_on_written);
  if (rc != 0) {
    free(pw);
    p->write_failed = 1;
    lua_pushnil(L);
    lua_pushstring(L, uv_strerror(rc));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_pipe_read(lua_State *L) {
  pipe_proc *p = check_pipe(L);
  double timeout = luaL_optnumber(L, 2, 60);
  char why[160];
  if (util_check_seconds(timeout, "h:read: timeout", why, sizeof why) != 0) return luaL_error(L, "%s", why);
  if (p->n > 0) {
    lua_pushlstring(L, p->buf, p->n);
    p->n = 0;
    if (p->paused && !p->out_eof) {
      p->paused = 0;
      uv_read_start((uv_stream_t *)&p->out, pp_alloc, pp_on_out);
    }
    return 1;
  }
  if (p->out_eof && p->err_eof) {
    lua_pushnil(L);
    lua_pushliteral(L, "eof");
    return 2;
  }
  act_call *ac = actvm_current(L);
  if (!ac) return luaL_error(L, "h:read must be called inside an activity");
  if (!lua_isyieldable(L)) return luaL_error(L, "h:read cannot wait here (not yieldable)");
  if (p->ac) return luaL_error(L, "h:read: another read is waiting");
  if (p->paused) {
    p->paused = 0;
    uv_read_start((uv_stream_t *)&p->out, pp_alloc, pp_on_out);
  }
  int rc = uv_timer_start(&p->timer, pp_on_timeout, (uint64_t)(timeout * 1000.0), 0);
  if (rc != 0) return luaL_error(L, "h:read: cannot start a timer: %s", uv_strerror(rc));
  p->ac = ac;
  actvm_set_pending(ac, pp_cancel, p);
  return lua_yield(L, 0);
}

static int l_pipe_stderr(lua_State *L) {
  pipe_proc *p = check_pipe(L);
  lua_pushlstring(L, p->err_tail, p->err_n);
  return 1;
}

static int l_pipe_close(lua_State *L) {
  pipe_proc **pp = luaL_checkudata(L, 1, PIPE_MT);
  if (!*pp) return 0;
  pipe_proc *p = *pp;
  *pp = NULL;
  pp_close(p);
  lua_pushinteger(L, p->exit_code); /* p lives until its handles have closed */
  return 1;
}

static int l_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  char *argv[256], *env[128];
  const char *cwd = command_of(L, "proc.open", argv, env);
  lua_getfield(L, 1, "max_buffer");
  lua_Integer max = luaL_optinteger(L, -1, 1 << 20);
  if (max < 4096) max = 4096;
  pipe_proc **ud = lua_newuserdatauv(L, sizeof *ud, 0);
  *ud = NULL;
  luaL_setmetatable(L, PIPE_MT);

  int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 || pipe2(pi, O_CLOEXEC) != 0) {
    int e = errno;
    int all[] = {po[0], po[1], pe[0], pe[1], pi[0], pi[1]};
    for (int i = 0; i < 6; i++)
      if (all[i] >= 0) close(all[i]);
    return spawn_error(L, argv[0], strerror(e));
  }
  child_opts so = {.argv = argv, .envp = env, .cwd = cwd, .fd = {pi[0], po[1], pe[1]}, .new_session = 1};
  pid_t pid = 0;
  int rc = child_spawn(&so, &pid);
  int pidfd = rc == 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
  int pidfd_errno = errno;
  close(po[1]);
  close(pe[1]);
  close(pi[0]);
  if (rc != 0 || pidfd < 0) {
    if (rc == 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
    close(po[0]);
    close(pe[0]);
    close(pi[1]);
    return spawn_error(L, argv[0], rc ? strerror(rc) : strerror(pidfd_errno));
  }
  uv_loop_t *loop = actvm_loop_of(L);
  pipe_proc *p = util_xcalloc(1, sizeof *p);
  p->pid = pid;
  p->pidfd = pidfd;
  p->max = (size_t)max;
  p->exit_code = -1;
  p->exit_watch.data = p->out.data = p->err.data = p->in.data = p->timer.data = p;
  uv_pipe_t *pipes[3] = {&p->out, &p->err, &p->in};
  int fds[3] = {po[0], pe[0], pi[1]};
  int urc = 0;
  for (int i = 0; i < 3 && urc == 0; i++)
    if ((urc = uv_pipe_init(loop, pipes[i], 0)) == 0) p->open_handles++;
  if (urc == 0 && (urc = uv_timer_init(loop, &p->timer)) == 0) p->open_handles++;
  if (urc == 0 && (urc = uv_poll_init(loop, &p->exit_watch, pidfd)) == 0) p->open_handles++;
  for (int i = 0; i < 3 && urc == 0; i++)
    if ((urc = uv_pipe_open(pipes[i], fds[i])) == 0) fds[i] = -1;
  if (urc == 0) urc = uv_poll_start(&p->exit_watch, UV_READABLE, pp_on_exit);
  if (urc == 0) urc = uv_read_start((uv_stream_t *)&p->out, pp_alloc, pp_on_out);
  if (urc == 0) urc = uv_read_start((uv_stream_t *)&p->err, pp_alloc, pp_on_err);
  if (urc != 0) {
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]);
    pp_close(p);
    return spawn_error(L, argv[0], uv_strerror(urc));
  }
  *ud = p;
  return 1;
}

static void pipe_metatable(lua_State *L) {
  static const luaL_Reg methods[] = {{"write", l_pipe_write}, {"read", l_pipe_read}, {"stderr", l_pipe_stderr},
                                     {"close", l_pipe_close}, {NULL, NULL}};
  luaL_newmetatable(L, PIPE_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_pipe_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_pipe_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
}

int luaopen_engine_proc(lua_State *L) {
  static const luaL_Reg lib[] = {{"run", l_run}, {"open", l_open}, {NULL, NULL}};
  pipe_metatable(L);
  luaL_newlib(L, lib);
  return 1;
}
