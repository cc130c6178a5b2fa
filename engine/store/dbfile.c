/* dbfile: the database file itself. The worker lock lets one worker run a
 * database's workflows at a time; the watch tells a process (a worker, a
 * client following a session) soon after another process commits to it. */
#include "dbfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "render.h"
#include "util.h"

struct dbwatch {
  uv_loop_t *loop;
  store *st;
  uv_fs_event_t fs;
  uv_timer_t poll;
  uv_poll_t *listen; /* PostgreSQL: readable when a commit was announced; NULL when none */
  int listen_fd;           /* its descriptor: given back when it is lost, so the store replaces it; -1 */
  int64_t listen_retry_at; /* when to try listening again (a connection that cannot open blocks) */
  int64_t version;
  char base[256];
  void (*cb)(void *ud);
  void *ud;
  int closing;
};

/* The database file's own path in out (PATH_MAX bytes): symlinks followed (a
 * dangling one too: the database may not exist yet), "." and ".." resolved,
 * so every name of one file gives one lock. Returns 0, or -1 with errno. */
static int canonical_db_path(const char *db_path, char *out) {
  char cur[PATH_MAX];
  if (snprintf(cur, sizeof cur, "%s", db_path) >= (int)sizeof cur) return errno = ENAMETOOLONG, -1;
  for (int hops = 0; hops < 40; hops++) {
    if (realpath(cur, out)) return 0;
    if (errno != ENOENT) return -1;
    char link[PATH_MAX], *d = util_strdup(cur), *b = util_strdup(cur);
    const char *dir = dirname(d), *base = basename(b);
    ssize_t n = readlink(cur, link, sizeof link - 1);
    int rc = 1; /* 1: follow the link */
    if (n < 0) {
      /* no such file yet: its directory resolved, its name kept */
      char rdir[PATH_MAX];
      rc = !realpath(dir, rdir) ? -1
           : snprintf(out, PATH_MAX, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) >= PATH_MAX
               ? (errno = ENAMETOOLONG, -1)
               : 0;
    } else {
      link[n] = 0;
      char next[PATH_MAX];
      if (snprintf(next, sizeof next, "%s%s%s", link[0] == '/' ? "" : dir, link[0] == '/' ? "" : "/", link) >=
          (int)sizeof next)
        rc = (errno = ENAMETOOLONG, -1);
      else
        memcpy(cur, next, sizeof cur);
    }
    free(d);
    free(b);
    if (rc <= 0) return rc;
  }
  return errno = ELOOP, -1;
}

int engine_lock(const char *db_path, const char *mode, char *holder, size_t holderlen) {
  /* PostgreSQL: a session-level advisory lock held by a connection of its own */
  if (store_is_url(db_path)) return store_remote_lock(db_path, mode, holder, holderlen);
  /* beside the file itself: a symlink or "x/../engine.db" to the same
   * database must find the same lock, or two workers run one workflow */
  char real[PATH_MAX], path[PATH_MAX + 8];
  if (canonical_db_path(db_path, real) != 0) {
    util_seterr(holder, holderlen, "cannot resolve %s: %s", db_path, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s.lock", real);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    util_seterr(holder, holderlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[128] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    util_seterr(holder, holderlen, "%s", *buf ? buf : "another engine process");
    close(fd);
    return -1;
  }
  char buf[128];
  int n = snprintf(buf, sizeof buf, "engine %s (pid %d)\n", mode, (int)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) { /* informational only */
  }
  return fd;
}

void engine_unlock(int fd) {
  if (fd < 0) return;
  store_remote_unlock(fd); /* ends the lock's session when fd is one */
  close(fd);
}

int engine_db_missing(const char *db) { return store_is_url(db) || access(db, F_OK) == 0 ? 0 : -1; }

const char *engine_db_shown(const char *db, char *buf, size_t n) {
  if (!store_is_url(db)) return db;
  const char *user = strstr(db, "://") + 3, *end = user + strcspn(user, "/?#"), *at = NULL;
  for (const char *p = user; p < end; p++)
    if (*p == '@') at = p;
  const char *colon = at ? memchr(user, ':', (size_t)(at - user)) : NULL;
  if (!colon) return db;
  snprintf(buf, n, "%.*s%s", (int)(colon - db), db, at);
  return buf;
}

int engine_data_dir(const char *db, char *out) {
  *out = 0;
  if (!store_is_url(db)) {
    char *tmp = util_strdup(db);
    int ok = realpath(dirname(tmp), out) != NULL;
    free(tmp);
    if (!ok) *out = 0;
    return ok ? 0 : -1;
  }
  const char *env = getenv("ENGINE_DATA_DIR");
  const char *dir = env && *env ? env : "engine-data";
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
  if (!realpath(dir, out)) return *out = 0, -1;
  return 0;
}

/* ---------------------------------------------------------------- watch --- */

static void watch_check(dbwatch *w) {
  int64_t v = store_data_version(w->st);
  if (v != w->version) {
    w->version = v;
    w->cb(w->ud);
  }
}

static void on_fs(uv_fs_event_t *h, const char *filename, int events, int status) {
  (void)events;
  dbwatch *w = h->data;
  if (status < 0 || !filename || strncmp(filename, w->base, strlen(w->base)) == 0) watch_check(w);
}

static void free_handle(uv_handle_t *h) { free(h); }

static void listen_stop(dbwatch *w) {
  if (!w->listen) return;
  uv_close((uv_handle_t *)w->listen, free_handle); /* stops polling its descriptor at once */
  w->listen = NULL;
}

static void on_listen(uv_poll_t *h, int status, int events) {
  (void)events;
  dbwatch *w = h->data;
  int heard = status < 0 ? -1 : store_commit_drain(w->st, w->listen_fd);
  if (heard < 0) { /* the connection went: the timer polls, and listens again */
    listen_stop(w);
    watch_check(w);
  } else if (heard) {
    w->cb(w->ud); /* another connection committed: the counter need not be asked (a round trip) */
  }
}

/* Listens on the store's commit descriptor when it has one. */
static void listen_start(dbwatch *w) {
  int fd = w->listen ? -1 : store_commit_fd(w->st, w->listen_fd);
  if (fd < 0) return;
  w->listen_fd = fd;
  uv_poll_t *p = util_xcalloc(1, sizeof *p);
  if (uv_poll_init_socket(w->loop, p, fd) != 0) {
    free(p);
    return;
  }
  p->data = w;
  w->listen = p;
  uv_poll_start(p, UV_READABLE, on_listen);
}

static void on_poll(uv_timer_t *t) {
  dbwatch *w = t->data;
  if (!w->listen && store_is_url(store_path(w->st)) && util_mono_ms() >= w->listen_retry_at) {
    w->listen_retry_at = util_mono_ms() + 5000;
    listen_start(w);
  }
  watch_check(w);
}

dbwatch *dbwatch_start(uv_loop_t *loop, store *st, void (*cb)(void *ud), void *ud) {
  dbwatch *w = util_xcalloc(1, sizeof *w);
  w->loop = loop;
  w->st = st;
  w->cb = cb;
  w->ud = ud;
  w->version = store_data_version(st);
  uv_fs_event_init(loop, &w->fs);
  uv_timer_init(loop, &w->poll);
  w->fs.data = w->poll.data = w;
  w->listen_fd = -1;
  if (store_is_url(store_path(st))) {
    /* no file to watch: every commit notifies (LISTEN), and the commits
     * counter is polled as the safety net (store_data_version), often
     * while the listening connection cannot be opened */
    listen_start(w);
    const char *pm = getenv("ENGINE_PG_POLL_MS");
    uint64_t every = pm && atoi(pm) > 0 ? (uint64_t)atoi(pm) : w->listen ? 1000 : 100;
    uv_timer_start(&w->poll, on_poll, every, every);
    return w;
  }
  /* the directory the WAL is written in, whatever name the database was opened by */
  char real[PATH_MAX];
  const char *path = canonical_db_path(store_path(st), real) == 0 ? real : store_path(st);
  char *p1 = util_strdup(path), *p2 = util_strdup(path);
  snprintf(w->base, sizeof w->base, "%s", basename(p1));
  /* inotify on the directory sees every write to the WAL of any process; the
   * timer is the safety net, and the only way when inotify is unavailable
   * (its instance or watch limit reached): then it polls often, and says so */
  const char *dir = dirname(p2);
  int rc = uv_fs_event_start(&w->fs, on_fs, dir, 0);
  uint64_t every = 1000;
  if (rc != 0) {
    every = 100;
    log_msg(LOGL_WARNING, "cannot watch %s for commits (%s); polling every %d ms instead", dir,
            uv_strerror(rc), (int)every);
  }
  free(p1);
  free(p2);
  uv_timer_start(&w->poll, on_poll, every, every);
  return w;
}

static void watch_closed(uv_handle_t *h) {
  dbwatch *w = h->data;
  if (++w->closing == 3) free(w);
}

void dbwatch_stop(dbwatch *w) {
  w->closing = 1;
  listen_stop(w);
  uv_close((uv_handle_t *)&w->fs, watch_closed);
  uv_close((uv_handle_t *)&w->poll, watch_closed);
}

