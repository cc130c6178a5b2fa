/* cmd_doctor: `engine doctor`, what a first session needs of this host, one
 * row per check with its state (ok, warn, FAIL), what it saw and the fix.
 * The checks are the table CHECKS below, in the order they print; a check
 * writes one row (or a few: one per model provider). What only the Lua
 * library knows (the sandbox drivers, the model runners' keys) is asked of
 * lua/doctor.lua, once for all those rows (worker.doctor through
 * engine_maintenance); the policies and triggers load as `engine policy
 * check` and `engine trigger check` load them. Nothing is created, migrated
 * or changed: the database is opened read-only, and its write test is a
 * transaction that rolls back. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli_internal.h"
#include "config.h"
#include "dbfile.h"
#include "engine.h"
#include "home.h"
#include "json.h"
#include "util.h"

static const char *DOCTOR_HELP =
    "usage: engine doctor [--json] [--color WHEN] [--db PATH|URL]\n"
    "\n"
    "Checks what a first session needs of this host and prints a row per check:\n"
    "its state (ok, warn or FAIL), what it saw, and the fix (a command or a setting).\n"
    "The config file, the engine's files (ENGINE_HOME), the database (it opens, its\n"
    "schema version, it takes writes, free disk space; one that does not exist yet\n"
    "is fine when it can be created), a PostgreSQL server's clock against this\n"
    "host's, the sandbox driver (Docker and the sandbox image, or bubblewrap, user\n"
    "namespaces and its rootfs), the workspaces' file system, the policies and the\n"
    "webhook triggers, and the model providers' API keys (whether each is set,\n"
    "never its value). It changes nothing: no database is created or migrated.\n"
    "\n"
    "Exit 0 when no check FAILs (warnings allowed), 1 otherwise. --json prints\n"
    "{\"ok\": BOOL, \"checks\": [{\"check\", \"state\", \"detail\", \"fix\"}, ...]}.\n";

typedef enum { ST_OK, ST_WARN, ST_FAIL } state;
static const char *const STATE_NAME[] = {"ok", "warn", "FAIL"};

typedef struct row {
  char *check, *detail, *fix;
  state st;
} row;

/* The database as the database check found it, for the checks after it. */
typedef enum { DB_UNKNOWN, DB_MISSING, DB_EMPTY, DB_OPEN, DB_FAILED } db_state;

typedef struct doctor {
  const char *db;
  char shown[1024];
  db_state dbs;
  store *st;
  int lua_asked;
  char *lua_report; /* worker.doctor's answer, or its error */
  int lua_failed;
  int home_failed; /* the engine files row failed: what needs the Lua library is not checked */
  row *rows;
  size_t nrows, cap;
} doctor;

static void add_row(doctor *d, const char *check, state st, const char *detail, const char *fix) {
  if (d->nrows == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 32;
    d->rows = util_xrealloc(d->rows, d->cap * sizeof *d->rows);
  }
  d->rows[d->nrows++] = (row){util_strdup(check), util_strdup(detail ? detail : ""), util_strdup(fix ? fix : ""), st};
}

static void add_rowf(doctor *d, const char *check, state st, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_rowf(doctor *d, const char *check, state st, const char *fix, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *detail = util_vfmt(fmt, ap);
  va_end(ap);
  add_row(d, check, st, detail, fix);
  free(detail);
}

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The folder a database file is in ("." for a bare name), in out. */
static void db_dir(const char *db, char *out, size_t n) {
  char *tmp = util_strdup(db);
  snprintf(out, n, "%s", dirname(tmp));
  free(tmp);
}

/* --------------------------------------------------------------- checks --- */

static void check_config(doctor *d, const char *name) {
  const char *f = config_file();
  if (f) add_rowf(d, name, ST_OK, "", "%s", f);
  else add_row(d, name, ST_OK, "none (defaults and environment)", "");
}

/* The engine's own files: its home and the folders a session reads. */
static void check_home(doctor *d, const char *name) {
  const char *home = engine_home();
  if (!home) {
    d->home_failed = 1;
    add_row(d, name, ST_FAIL, engine_home_error(),
            "set ENGINE_HOME to the folder that holds lua/, workflows/, policies/, skills/ and web/ (an installed "
            "engine's is PREFIX/share/engine)");
    return;
  }
  static const char *const SUBS[] = {"lua", "workflows", "policies", "skills", "web"};
  char missing[256] = "", p[PATH_MAX + 16];
  for (size_t i = 0; i < sizeof SUBS / sizeof *SUBS; i++) {
    snprintf(p, sizeof p, "%s/%s", home, SUBS[i]);
    if (!is_dir(p)) snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s/", *missing ? ", " : "", SUBS[i]);
  }
  const char *lua = getenv("ENGINE_LUA_DIR");
  char also[PATH_MAX + 64] = "";
  if (lua && *lua) snprintf(also, sizeof also, "; the Lua library from ENGINE_LUA_DIR=%s", lua);
  if (*missing) d->home_failed = 1;
  if (*missing)
    add_rowf(d, name, ST_FAIL, "install the engine again (cmake --install), or set ENGINE_HOME to a complete one",
             "%s (%s) lacks %s%s", home, engine_home_source(), missing, also);
  else
    add_rowf(d, name, ST_OK, "", "%s (%s)%s", home, engine_home_source(), also);
}

/* Opens the database read-only (creating nothing) or finds that it does not
 * exist yet; the checks after this one read what it found. */
static void check_database(doctor *d, const char *name) {
  char err[1400], why[768], dir[PATH_MAX];
  int url = store_is_url(d->db);
  if (!url && engine_db_missing(d->db) == -1) {
    db_dir(d->db, dir, sizeof dir);
    d->dbs = DB_MISSING;
    if (!is_dir(dir)) {
      d->dbs = DB_FAILED;
      add_rowf(d, name, ST_FAIL, "create the folder (mkdir -p), or choose another database: --db PATH or ENGINE_DB",
               "no database at %s, and its folder %s does not exist", d->db, dir);
    } else if (cli_unwritable(d->db, why, sizeof why)) {
      d->dbs = DB_FAILED;
      add_rowf(d, name, ST_FAIL, "make the folder writable for the engine's user, or choose another database: "
               "--db PATH or ENGINE_DB", "no database at %s, and it cannot be made: %s", d->db, why);
    } else {
      add_rowf(d, name, ST_OK, "", "%s does not exist yet: it will be created at first start (SQLite)", d->db);
    }
    return;
  }
  int rc = store_open_readonly(d->db, 5000, &d->st, err, sizeof err);
  if (rc == STORE_OK) {
    d->dbs = DB_OPEN;
    struct stat sb;
    if (url) add_rowf(d, name, ST_OK, "", "%s (PostgreSQL)", d->shown);
    else add_rowf(d, name, ST_OK, "", "%s (SQLite, %lld KiB)", d->db, stat(d->db, &sb) == 0 ? (long long)sb.st_size / 1024 : 0LL);
  } else if (rc == STORE_EMPTY) {
    d->dbs = DB_EMPTY;
    add_rowf(d, name, ST_OK, "", "%s (%s) holds no engine data yet: the engine makes its tables at first start",
             d->shown, url ? "PostgreSQL" : "SQLite");
  } else {
    d->dbs = DB_FAILED;
    if (!url && cli_unwritable(d->db, why, sizeof why)) snprintf(err + strlen(err), sizeof err - strlen(err), " (%s)", why);
    add_row(d, name, ST_FAIL, err,
            url ? "check the URL (--db or ENGINE_DB: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE), that the server "
                  "runs and takes this user; a newer engine's database needs that engine"
                : "check --db or ENGINE_DB and the file's permissions; a newer engine's database needs that engine");
  }
}

static int db_unchecked(doctor *d, const char *name) {
  if (d->dbs != DB_FAILED && d->dbs != DB_UNKNOWN) return 0;
  add_row(d, name, ST_WARN, "not checked: the database did not open", "see the database row");
  return 1;
}

static void check_schema(doctor *d, const char *name) {
  if (db_unchecked(d, name)) return;
  int known = store_schema_version(d->db);
  if (d->dbs != DB_OPEN) {
    add_rowf(d, name, ST_OK, "", "none yet: it will be made at version %d (this engine's)", known);
    return;
  }
  char *v = NULL;
  int found = store_meta_get(d->st, "schema_version", &v);
  int have = found == 1 && v ? atoi(v) : 0;
  free(v);
  if (found < 0)
    add_rowf(d, name, ST_FAIL, "", "cannot read it: %s", store_errmsg(d->st));
  else if (have == known)
    add_rowf(d, name, ST_OK, "", "version %d (this engine's)", have);
  else if (have < known)
    add_rowf(d, name, ST_WARN, "engine migrate (any command that writes does it too)",
             "version %d: this engine (version %d) brings it up to date when it first writes", have, known);
  else
    add_rowf(d, name, ST_FAIL, "use the newer engine that wrote it", "version %d: newer than this engine's %d", have, known);
}

static void check_writable(doctor *d, const char *name) {
  if (db_unchecked(d, name)) return;
  char why[768], err[1024];
  int url = store_is_url(d->db);
  if (!url && cli_unwritable(d->db, why, sizeof why)) {
    add_row(d, name, ST_FAIL, why, "make the file and its folder writable for the engine's user, or choose another "
                                   "database: --db PATH or ENGINE_DB");
  } else if (d->dbs == DB_MISSING) {
    add_row(d, name, ST_OK, "its folder takes the new file", "");
  } else if (d->dbs == DB_EMPTY) {
    add_row(d, name, ST_OK, url ? "not tried on a database without the engine's tables (its user needs CREATE on the schema)"
                                : "the file and its folder are writable", "");
  } else if (store_write_probe(d->st, err, sizeof err) != 0) {
    add_row(d, name, ST_FAIL, err, url ? "grant the URL's user INSERT, UPDATE and DELETE on the engine's tables"
                                       : "make the file and its folder writable for the engine's user");
  } else {
    add_row(d, name, ST_OK, "a write transaction began and rolled back", "");
  }
}

/* Free space where the database lives (SQLite), or where the engine's files
 * beside a PostgreSQL database live (ENGINE_DATA_DIR, else ./engine-data:
 * workspaces and limits.lua); the nearest folder that exists. */
static void check_disk(doctor *d, const char *name) {
  char dir[PATH_MAX];
  const char *data = getenv("ENGINE_DATA_DIR");
  int url = store_is_url(d->db);
  if (url) snprintf(dir, sizeof dir, "%s", data && *data ? data : "engine-data");
  else db_dir(d->db, dir, sizeof dir);
  while (!is_dir(dir) && strcmp(dir, "/") != 0 && strcmp(dir, ".") != 0) {
    char *tmp = util_strdup(dir);
    snprintf(dir, sizeof dir, "%s", dirname(tmp));
    free(tmp);
  }
  struct statvfs v;
  if (statvfs(dir, &v) != 0) {
    add_rowf(d, name, ST_WARN, "", "cannot measure %s: %s", dir, strerror(errno));
    return;
  }
  double free_b = (double)v.f_bavail * (double)v.f_frsize, total = (double)v.f_blocks * (double)v.f_frsize;
  const double MIB = 1024.0 * 1024.0, GIB = MIB * 1024.0;
  char amount[160];
  if (free_b >= GIB) snprintf(amount, sizeof amount, "%.1f GiB free of %.1f GiB", free_b / GIB, total / GIB);
  else snprintf(amount, sizeof amount, "%.0f MiB free of %.1f GiB", free_b / MIB, total / GIB);
  state st = free_b < 100 * MIB ? ST_FAIL : free_b < GIB ? ST_WARN : ST_OK;
  add_rowf(d, name, st, st == ST_OK ? "" : "free space on that file system, or move the database (--db, ENGINE_DB)",
           "%s at %s%s", amount, dir, url ? " (the engine's files beside the database; the server's own disk is not seen here)" : "");
}

/* Workers on one PostgreSQL database compare lease expiries written with
 * their own clocks against the server's: a clock off by a third of the lease
 * lets a lease lapse before its owner renews it. */
static void check_clock(doctor *d, const char *name) {
  if (!store_is_url(d->db)) {
    add_row(d, name, ST_OK, "not used (SQLite)", "");
    return;
  }
  if (d->dbs != DB_OPEN) {
    add_row(d, name, ST_WARN, d->dbs == DB_EMPTY ? "not checked: the database has no engine tables yet"
                                                  : "not checked: the database did not open", "");
    return;
  }
  int64_t skew, rtt, lease = engine_lease_ms(), mag;
  if (store_clock_skew(d->st, &skew, &rtt) < 0) {
    add_row(d, name, ST_WARN, store_errmsg(d->st), "");
    return;
  }
  mag = skew < 0 ? -skew : skew;
  state st = mag > lease / 3 ? ST_FAIL : mag > 1000 ? ST_WARN : ST_OK;
  add_rowf(d, name, st, st == ST_OK ? "" : "synchronise the clocks of this host and the database server (NTP: chrony or systemd-timesyncd)",
           "the server's clock is %lld ms %s this host's (round trip %lld ms; a third of the lease of %lld ms is the limit)",
           (long long)mag, skew < 0 ? "behind" : "ahead of", (long long)rtt, (long long)lease);
}

/* A row whose check needs the engine's Lua library, which did not run (why). */
static void lua_unrun(doctor *d, const char *name, const char *why) {
  if (d->home_failed) add_row(d, name, ST_WARN, "not checked: the engine's files are missing", "see the engine files row");
  else add_rowf(d, name, ST_FAIL, "", "cannot run the engine's Lua library: %s", why);
}

/* The checks of lua/doctor.lua: asked once, for every row of CHECKS that
 * names check_lua, and each row then takes its own. */
static void check_lua(doctor *d, const char *name);

static int count_item(void *ud, const char *v, size_t vn) {
  (void)v, (void)vn;
  ++*(int *)ud;
  return 0;
}

static void check_policies(doctor *d, const char *name) {
  char report[16384];
  if (engine_maintenance(NULL, "policy_check", "{}", report, sizeof report) != 0) {
    lua_unrun(d, name, report);
    return;
  }
  size_t n = strlen(report);
  char *dir = json_get_string(report, n, "dir"), *err = json_get_string(report, n, "error"),
       *hash = json_get_string(report, n, "hash");
  const char *v;
  size_t vn;
  char ok[8];
  if (strcmp(view_json_field(report, "ok", ok, sizeof ok), "true") != 0) {
    add_rowf(d, name, ST_FAIL, "correct it (engine policy check DIR says the same), or point ENGINE_POLICIES_DIR at a "
             "valid set", "%s: %s", dir ? dir : "?", err ? err : report);
  } else {
    int files = 0;
    if (json_get(report, n, "files", &v, &vn) == 1 && *v == '[') json_each(v, vn, count_item, &files);
    add_rowf(d, name, ST_OK, "", "%d file%s in %s (set %s)", files, files == 1 ? "" : "s", dir ? dir : "?", hash ? hash : "?");
  }
  free(dir);
  free(err);
  free(hash);
}

typedef struct routes {
  ubuf list, unset;
  int n;
} routes;

static int add_route(void *ud, const char *r, size_t rn) {
  routes *rs = ud;
  char *path = json_get_string(r, rn, "path"), *secret = json_get_string(r, rn, "secret");
  const char *v;
  size_t vn;
  int set = json_get(r, rn, "secret_set", &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0;
  char *item = util_fmt("%s%s", rs->n++ ? ", " : "", path ? path : "?");
  ubuf_add(&rs->list, item, strlen(item));
  free(item);
  if (!set && secret) {
    item = util_fmt("%s%s", rs->unset.n ? ", " : "", secret);
    ubuf_add(&rs->unset, item, strlen(item));
    free(item);
  }
  free(path);
  free(secret);
  return 0;
}

static void check_triggers(doctor *d, const char *name) {
  const char *dir = cli_triggers_dir();
  if (!is_dir(dir)) {
    add_rowf(d, name, ST_OK, "", "none: %s is not a folder (ENGINE_TRIGGERS_DIR; `engine serve --listen` reads "
             "WORKFLOWS/triggers), so no webhook starts a workflow", dir);
    return;
  }
  char report[16384], *q = json_quote(dir), *args_json = util_fmt("{\"dir\":%s}", q);
  int rc = engine_maintenance(NULL, "trigger_check", args_json, report, sizeof report);
  free(q);
  free(args_json);
  if (rc != 0) {
    lua_unrun(d, name, report);
    return;
  }
  size_t n = strlen(report);
  char ok[8];
  if (strcmp(view_json_field(report, "ok", ok, sizeof ok), "true") != 0) {
    char *err = json_get_string(report, n, "error");
    add_rowf(d, name, ST_FAIL, "correct it (engine trigger check DIR says the same)", "%s", err ? err : report);
    free(err);
    return;
  }
  routes rs = {{0}, {0}, 0};
  const char *v;
  size_t vn;
  if (json_get(report, n, "routes", &v, &vn) == 1 && *v == '[') json_each(v, vn, add_route, &rs);
  ubuf_add(&rs.list, "", 1);
  ubuf_add(&rs.unset, "", 1);
  if (rs.unset.n > 1)
    add_rowf(d, name, ST_WARN, "set each secret in the engine's environment or its credentials file (ENGINE_CREDENTIALS_FILE)",
             "%s: %s; not set: %s (those deliveries are refused)", dir, rs.list.p, rs.unset.p);
  else
    add_rowf(d, name, ST_OK, "", "%s: %s", dir, rs.n ? rs.list.p : "no trigger scripts");
  ubuf_free(&rs.list);
  ubuf_free(&rs.unset);
}

/* The Docker daemon's process on this host (its /proc/PID/comm is dockerd),
 * or 0: whose mount namespace the workspaces must be in. */
static long dockerd_pid(void) {
  DIR *dir = opendir("/proc");
  long found = 0;
  struct dirent *de;
  while (dir && !found && (de = readdir(dir))) {
    char *end, p[64], comm[32] = "";
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    snprintf(p, sizeof p, "/proc/%ld/comm", pid);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f) && strcmp(comm, "dockerd\n") == 0) found = pid;
    fclose(f);
  }
  if (dir) closedir(dir);
  return found;
}

/* As root the engine mounts each workspace's file system itself; in a mount
 * namespace other than the Docker daemon's (a unit's ProtectSystem= or
 * PrivateTmp=, unshare -m) those mounts are invisible to the daemon, which
 * then bind-mounts an empty folder or fails. Compared with the local
 * dockerd's namespace, else PID 1's. */
static void check_mount_ns(doctor *d, const char *name) {
  const char *driver = getenv("ENGINE_SANDBOX_DRIVER");
  if (geteuid() != 0 || (driver && *driver && strcmp(driver, "docker") != 0)) {
    add_row(d, name, ST_OK, "nothing to share: the engine mounts nothing for Docker (not root, or not the Docker driver)", "");
    return;
  }
  long pid = dockerd_pid();
  char other[64];
  snprintf(other, sizeof other, "/proc/%ld/ns/mnt", pid ? pid : 1L);
  const char *whose = pid ? "the Docker daemon's" : "PID 1's";
  struct stat self, them;
  if (stat("/proc/self/ns/mnt", &self) != 0 || stat(other, &them) != 0) {
    add_rowf(d, name, ST_OK, "", "cannot compare with %s (%s: %s)", whose, other, strerror(errno));
    return;
  }
  if (self.st_ino == them.st_ino && self.st_dev == them.st_dev) {
    add_rowf(d, name, ST_OK, "", "%s: the daemon sees the workspaces the engine mounts", whose);
    return;
  }
  add_rowf(d, name, ST_WARN,
           "run it as a user (engine.service's User=engine), in the daemon's mount namespace, or with the bwrap driver",
           "the engine runs as root in a mount namespace other than %s: the workspace file systems it mounts are "
           "not seen by the Docker daemon, and sandboxes start without them (or not at all)", whose);
}

/* ---------------------------------------------------------- the table --- */

typedef struct check {
  const char *name;
  void (*run)(doctor *d, const char *name);
} check;

static const check CHECKS[] = {
    {"config file", check_config},
    {"engine files", check_home},
    {"database", check_database},
    {"schema", check_schema},
    {"writable", check_writable},
    {"disk space", check_disk},
    {"clock skew", check_clock},
    {"sandbox driver", check_lua},
    {"docker", check_lua},
    {"sandbox image", check_lua},
    {"bubblewrap", check_lua},
    {"user namespaces", check_lua},
    {"sandbox rootfs", check_lua},
    {"workspace file system", check_lua},
    {"mount namespace", check_mount_ns},
    {"policies", check_policies},
    {"triggers", check_triggers},
    {"credentials", check_lua},
};

enum { LUA_REPORT_MAX = 1 << 20 };

typedef struct lua_rows {
  doctor *d;
  const char *name;
} lua_rows;

static int add_lua_row(void *ud, const char *r, size_t rn) {
  lua_rows *l = ud;
  char *check = json_get_string(r, rn, "check"), *st = json_get_string(r, rn, "state"),
       *detail = json_get_string(r, rn, "detail"), *fix = json_get_string(r, rn, "fix");
  state s = ST_FAIL;
  if (st && strcmp(st, "ok") == 0) s = ST_OK;
  else if (st && strcmp(st, "warn") == 0) s = ST_WARN;
  add_row(l->d, check ? check : l->name, s, detail ? detail : "(no detail)", fix);
  free(check), free(st), free(detail), free(fix);
  return 0;
}

static void check_lua(doctor *d, const char *name) {
  if (!d->lua_asked) {
    d->lua_asked = 1;
    ubuf names = {0};
    ubuf_add(&names, "{\"checks\":[", 11);
    int k = 0;
    for (size_t i = 0; i < sizeof CHECKS / sizeof *CHECKS; i++) {
      if (CHECKS[i].run != check_lua) continue;
      char *q = json_quote(CHECKS[i].name);
      if (k++) ubuf_add(&names, ",", 1);
      ubuf_add(&names, q, strlen(q));
      free(q);
    }
    ubuf_add(&names, "]}", 3);
    d->lua_report = util_xmalloc(LUA_REPORT_MAX);
    d->lua_failed = engine_maintenance(NULL, "doctor", names.p, d->lua_report, LUA_REPORT_MAX) != 0;
    ubuf_free(&names);
  }
  const char *v, *rows;
  size_t vn, rn, n = strlen(d->lua_report);
  if (d->lua_failed || json_get(d->lua_report, n, "checks", &v, &vn) != 1 || json_get(v, vn, name, &rows, &rn) != 1 ||
      *rows != '[') {
    lua_unrun(d, name, d->lua_failed ? d->lua_report : "lua/doctor.lua did not answer for this check");
    return;
  }
  lua_rows l = {d, name};
  json_each(rows, rn, add_lua_row, &l);
}

/* ------------------------------------------------------------- output --- */

static void print_json(const doctor *d, int ok) {
  ubuf b = {0};
  char *head = util_fmt("{\"ok\":%s,\"checks\":[", ok ? "true" : "false");
  ubuf_add(&b, head, strlen(head));
  free(head);
  for (size_t i = 0; i < d->nrows; i++) {
    const row *r = &d->rows[i];
    char *c = json_quote(r->check), *de = json_quote(r->detail), *f = json_quote(r->fix);
    char *item = util_fmt("%s{\"check\":%s,\"state\":\"%s\",\"detail\":%s,\"fix\":%s}", i ? "," : "", c,
                          STATE_NAME[r->st], de, f);
    ubuf_add(&b, item, strlen(item));
    free(c), free(de), free(f), free(item);
  }
  ubuf_add(&b, "]}", 3);
  cli_put_json(stdout, b.p);
}

/* The table for people: check, state, detail; a fix on a line of its own
 * under its detail. On a terminal it fits the width and is coloured; piped,
 * each row stays on its line. */
static void print_table(const doctor *d, const common *c, int fails, int warns) {
  static const char *const HEADER[] = {"CHECK", "STATE", "DETAIL"};
  size_t n = 0;
  for (size_t i = 0; i < d->nrows; i++) n += *d->rows[i].fix ? 2 : 1;
  pretty_cell *cells = util_xcalloc(n * 3, sizeof *cells), *p = cells;
  char **fixes = util_xcalloc(d->nrows ? d->nrows : 1, sizeof *fixes);
  static const pretty_tone TONE[] = {PRETTY_GOOD, PRETTY_WARN, PRETTY_BAD};
  for (size_t i = 0; i < d->nrows; i++) {
    const row *r = &d->rows[i];
    *p++ = (pretty_cell){r->check, PRETTY_PLAIN};
    *p++ = (pretty_cell){STATE_NAME[r->st], TONE[r->st]};
    *p++ = (pretty_cell){r->detail, PRETTY_PLAIN};
    if (*r->fix) {
      fixes[i] = util_fmt("fix: %s", r->fix);
      *p++ = (pretty_cell){"", PRETTY_PLAIN};
      *p++ = (pretty_cell){"", PRETTY_PLAIN};
      *p++ = (pretty_cell){fixes[i], r->st == ST_OK ? PRETTY_QUIET : PRETTY_PLAIN};
    }
  }
  int tty = cli_human_stdout(c);
  pretty_opts o = pretty_defaults(tty ? pretty_width(1) : 1000000, cli_color_on(c, 1));
  char *table = pretty_table(HEADER, 3, cells, n, &o);
  fputs(table, stdout);
  free(table);
  for (size_t i = 0; i < d->nrows; i++) free(fixes[i]);
  free(fixes);
  free(cells);
  printf("\n%s: %d failed, %d warning%s\n", fails ? "not ready" : "ready", fails, warns, warns == 1 ? "" : "s");
}

int cmd_doctor(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, DOCTOR_HELP, pos, 0, 0);
  if (rc || c->help) return rc;
  doctor d = {0};
  d.db = c->db;
  char shown[1024];
  snprintf(d.shown, sizeof d.shown, "%s", engine_db_shown(c->db, shown, sizeof shown));
  for (size_t i = 0; i < sizeof CHECKS / sizeof *CHECKS; i++) CHECKS[i].run(&d, CHECKS[i].name);
  store_close(d.st);
  int fails = 0, warns = 0;
  for (size_t i = 0; i < d.nrows; i++) fails += d.rows[i].st == ST_FAIL, warns += d.rows[i].st == ST_WARN;
  if (c->json) print_json(&d, !fails);
  else print_table(&d, c, fails, warns);
  fflush(stdout);
  for (size_t i = 0; i < d.nrows; i++) free(d.rows[i].check), free(d.rows[i].detail), free(d.rows[i].fix);
  free(d.rows);
  free(d.lua_report);
  return fails ? EXIT_FAILED : EXIT_OK;
}
