/* client: operations on a database that need no running loop, for the CLI
 * (and the HTTP API) in any process: the checks of ids, signal names and
 * scripts; creating a workflow, sending a signal, requesting cancellation,
 * each one transaction. engine_submit and engine_signal_local are the same
 * operations for a client inside a running engine: their writes join its
 * current batch. */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "json.h"
#include "modules.h"
#include "render.h"

/* Workflow ids are checked here and only here, for every client (CLI, API):
 * when a workflow is created, and when an id names no workflow (so ids an
 * older engine stored stay addressable). */
int engine_name_problem(const char *name, size_t max, const char *punct, char *what, size_t n) {
  size_t len = strlen(name);
  *what = 0;
  if (len == 0) snprintf(what, n, "it is empty");
  else if (len > max) snprintf(what, n, "it is %zu bytes, more than %zu", len, max);
  for (size_t i = 0; i < len && !*what; i++) {
    unsigned char c = (unsigned char)name[i];
    int alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (!alnum && !strchr(punct, c)) {
      char ch[16];
      uint32_t cp;
      size_t bad, cl = util_utf8_decode(name + i, len - i, &cp, &bad);
      render_buf(ch, sizeof ch, name + i, cl ? cl : 1, 0); /* the whole character */
      if (c == ' ') snprintf(what, n, "a space at byte %zu", i + 1);
      else snprintf(what, n, "'%s' at byte %zu is not allowed", ch, i + 1);
    } else if (i == 0 && !alnum) {
      snprintf(what, n, "it must start with a letter or a digit");
    }
  }
  return *what ? -1 : 0;
}

int engine_check_id(const char *id, char *err, size_t errlen) {
  static const char *rule =
      "ids are 1-128 bytes of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit, without \"..\"";
  char shown[48], what[64];
  render_buf(shown, sizeof shown, id, strlen(id), 0);
  engine_name_problem(id, ENGINE_ID_MAX, "._:@-", what, sizeof what);
  if (!*what && strstr(id, "..")) snprintf(what, sizeof what, "it contains \"..\"");
  if (!*what) return 0;
  util_seterr(err, errlen, "invalid workflow id \"%s\": %s (%s)", shown, what, rule);
  return -1;
}

/* An id for a start without --id: the script's name made to follow the id
 * rules (a run of other bytes becomes one '-', at most 100 bytes, "wf" when
 * nothing is left), then '-' and 8 random hex digits. */
void engine_generate_id(const char *script, char *out, size_t n) {
  char *tmp = util_strdup(script), name[101];
  char *base = basename(tmp), *dot = strrchr(base, '.');
  if (dot && dot != base) *dot = 0;
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)base; *p && k < sizeof name - 1; p++) {
    int alnum = (*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z');
    char ch = alnum || *p == '_' ? (char)*p : '-';
    if (k == 0 ? !alnum : ch == '-' && name[k - 1] == '-') continue;
    name[k++] = ch;
  }
  name[k] = 0;
  snprintf(out, n, "%s%s%08llx", k ? name : "wf", k && name[k - 1] == '-' ? "" : "-",
           (unsigned long long)(util_random64() & 0xffffffffull));
  free(tmp);
}

void engine_unknown_id(const char *id, char *err, size_t errlen) {
  if (engine_check_id(id, err, errlen) == 0) util_seterr(err, errlen, "unknown workflow '%s'", id);
}

int engine_check_signal_name(const char *name, char *err, size_t errlen) {
  size_t n = strlen(name);
  char shown[48], what[64] = "";
  render_buf(shown, sizeof shown, name, n, 0);
  if (n == 0) snprintf(what, sizeof what, "it is empty");
  else if (n > ENGINE_SIGNAL_NAME_MAX) snprintf(what, sizeof what, "it is %zu bytes, more than %d", n, ENGINE_SIGNAL_NAME_MAX);
  if (!*what) util_text_problem(name, n, 0, what, sizeof what);
  if (!*what) return 0;
  util_seterr(err, errlen, "invalid signal name \"%s\": %s (signal names are 1-%d bytes of UTF-8 without control "
              "characters)", shown, what, ENGINE_SIGNAL_NAME_MAX);
  return -1;
}

char *engine_session_input(const char *kind, const char *text, const char *sender, char *err, size_t errlen) {
  text = text ? text : "";
  size_t n = strlen(text);
  char why[128];
  if (strcmp(kind, "message") && strcmp(kind, "interrupt") && strcmp(kind, "close")) {
    util_seterr(err, errlen, "unknown kind '%.40s' (message, interrupt or close)", kind);
    return NULL;
  }
  if (strcmp(kind, "message") == 0 && n == 0) {
    util_seterr(err, errlen, "the message is empty");
    return NULL;
  }
  size_t max = strcmp(kind, "message") == 0 ? ENGINE_MESSAGE_MAX : 4096;
  if (n > max) {
    util_seterr(err, errlen, "the %s is %zu bytes, more than %zu", strcmp(kind, "message") == 0 ? "message" : "reason", n,
                max);
    return NULL;
  }
  if (util_text_problem(text, n, 1, why, sizeof why) != 0) {
    util_seterr(err, errlen, "invalid %s: %s", strcmp(kind, "message") == 0 ? "message" : "reason", why);
    return NULL;
  }
  char *qk = json_quote(kind), *qs = json_quote(sender ? sender : ""), *qt = json_quote(text);
  char *out = util_fmt("{\"kind\":%s,\"sender\":%s,\"text\":%s}", qk, qs, qt);
  free(qk);
  free(qs);
  free(qt);
  return out;
}

int engine_reserved_signal(const char *name, char *err, size_t errlen) {
  if (strncmp(name, "session:", 8) != 0) return 0;
  util_seterr(err, errlen, "session signals are sent as what they are (engine message, interrupt or close, or POST "
              "/v1/workflows/{id}/messages), so the session knows who sent them");
  return 1;
}

/* Scripts are regular files: opened without blocking, so a FIFO in their place
 * is refused instead of hanging the read, and a directory is named as one. */
char *engine_read_script(const char *path, size_t *len, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    util_seterr(err, errlen, "workflow script %s is %s, not a file", path, util_file_kind(sb.st_mode));
    close(fd);
    return NULL;
  }
  ubuf b = {0};
  int e = util_read_fd(fd, 0, &b);
  close(fd);
  if (e) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(e));
    ubuf_free(&b);
    return NULL;
  }
  ubuf_add(&b, "", 1); /* NUL-terminated for the callers that print it */
  *len = b.n - 1;
  return b.p;
}

int engine_check_script(const char *path, const char *src, size_t len, char *err, size_t errlen) {
  char chunk[PATH_MAX + 2], absdir[PATH_MAX], why[768];
  snprintf(chunk, sizeof chunk, "@%s", path);
  if (wfvm_check_syntax(src, len, chunk, err, errlen) != 0) return -1;
  /* before anything is written: a script that cannot start leaves no failed row */
  char *tmp = util_strdup(path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  modhost m = {NULL, NULL, 0, absdir, engine_lua_dir(), 0};
  wfvm_host host = {&m, NULL, NULL, modules_load, NULL};
  if (wfvm_check_main(&host, src, len, chunk, why, sizeof why) == 0) return 0;
  util_seterr(err, errlen, "workflow script %s %s", path, why);
  return -1;
}

static int commit_or_fail(store *st, char *err, size_t errlen) {
  if (store_commit(st) != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

/* A new workflow's row and first event, for a run that starts at once
 * without reading them back. */
typedef struct made_wf {
  wf_row w;
  hist_list h;
} made_wf;

/* Writes a new workflow (row, code, WorkflowStarted, and a task when queue is
 * set) into the open transaction, and into *made when given. Nothing is
 * written when the script cannot be read or parsed, or when id exists
 * (*existed). */

static int write_workflow(store *st, const char *id, const char *script_path, const char *input_json, int queue,
                          const scriptbuf *pre, int *existed, made_wf *made, char *err, size_t errlen) {
  *existed = 0;
  size_t len = 0;
  char *src;
  char hash[65];
  if (pre) { /* read, hashed and checked before, unchanged since */
    src = util_xmalloc(pre->len + 1);
    memcpy(src, pre->src, pre->len + 1);
    len = pre->len;
    memcpy(hash, pre->hash, sizeof hash);
  } else {
    src = engine_read_script(script_path, &len, err, errlen);
    if (!src) return -1;
    if (engine_check_script(script_path, src, len, err, errlen) != 0) {
      free(src);
      return -1;
    }
    util_sha256_hex(src, len, hash);
  }
  /* the log holds the input in canonical form: one line, stable bytes; a bad
   * one is refused before the transaction begins */
  char *canon = json_accept(input_json, strlen(input_json), "the workflow input", err, errlen);
  if (!canon) {
    free(src);
    return -1;
  }
  char absdir[PATH_MAX];
  char *tmp = util_strdup(script_path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  if (store_begin(st) != STORE_OK) {
    free(src);
    free(canon);
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found == 1) {
    wf_row_free(&w);
    free(src);
    free(canon);
    *existed = 1;
    return 0;
  }
  if (engine_check_id(id, err, errlen) != 0) {
    free(src);
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  wf_row row = {(char *)id, 1, (char *)"running", (char *)script_path, absdir, hash, (char *)input_json,
                NULL, NULL, 0, now, now};
  char seed[17];
  snprintf(seed, sizeof seed, "%016llx", (unsigned long long)util_random64());
  row.input = canon;
  char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"}", canon, seed);
  hist_event ev = {1, "WorkflowStarted", 0, NULL, NULL, payload, now};
  int bad = found < 0 || store_code_put(st, hash, script_path, src, len) != STORE_OK ||
            store_wf_insert(st, &row) != STORE_OK || store_hist_append(st, id, 1, &ev) != STORE_OK ||
            (queue && store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK);
  if (made && !bad) {
    made->w = (wf_row){util_strdup(id), 1, util_strdup("running"), util_strdup(script_path), util_strdup(absdir),
                       util_strdup(hash), util_strdup(canon), NULL, NULL, 0, now, now};
    made->h.v = util_xcalloc(1, sizeof *made->h.v);
    made->h.n = made->h.cap = 1;
    made->h.v[0] = (hist_event){1, util_strdup(ev.type), 0, NULL, NULL, payload, now};
    payload = NULL;
  }
  free(payload);
  free(canon);
  free(src);
  if (bad) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

int engine_create_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                           int *existed, char *err, size_t errlen) {
  if (write_workflow(st, id, script_path, input_json, 1, NULL, existed, NULL, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  if (*existed) {
    store_rollback(st);
    return 0;
  }
  return commit_or_fail(st, err, errlen);
}

/* The script at path, read once and re-read only when the file changes. */
static const scriptbuf *cached_script(engine *e, const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    return NULL;
  }
  int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  scriptbuf *s = strmap_get(&e->scripts, path);
  if (s && s->mtime_ns == mt && s->size == (int64_t)sb.st_size) return s;
  size_t len;
  char *src = engine_read_script(path, &len, err, errlen);
  if (!src) return NULL;
  if (engine_check_script(path, src, len, err, errlen) != 0) {
    free(src);
    return NULL;
  }
  if (!s) {
    s = util_xcalloc(1, sizeof *s);
    strmap_put(&e->scripts, path, s);
  }
  free(s->src);
  s->src = src;
  s->len = len;
  s->mtime_ns = mt;
  s->size = (int64_t)sb.st_size;
  util_sha256_hex(src, len, s->hash);
  return s;
}

int engine_submit(engine *e, const char *id, const char *script_path, const char *input_json, int *existed,
                  char *err, size_t errlen) {
  int found = 0;
  const scriptbuf *pre = cached_script(e, script_path, err, errlen);
  if (!pre) return -1;
  made_wf made = {0};
  if (write_workflow(e->st, id, script_path, input_json, 0, pre, &found, &made, err, errlen) != 0) return -1;
  if (existed) *existed = found;
  if (found) {
    if (existed) return 0;
    util_seterr(err, errlen, "workflow '%s' already exists", id);
    return -1;
  }
  engine_unsettle(e, id, 1, 1); /* its first step begins once the start is committed */
  run_load(e, &made.w, &made.h); /* from what was just written: no read back */
  wf_row_free(&made.w);
  hist_list_free(&made.h);
  return 0;
}

/* Checks, inside the open transaction, that workflow id exists and has not
 * finished; *cancel gets its cancel state. Nothing is written. */
static int check_live(store *st, const char *id, const char *what, int *cancel, char *err, size_t errlen) {
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, err, errlen);
    else util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  int rc = 0;
  if (engine_status_terminal(w.status)) {
    util_seterr(err, errlen, "workflow '%s' is %s; %s not delivered", id, w.status, what);
    rc = -1;
  }
  if (cancel) *cancel = w.cancel;
  wf_row_free(&w);
  return rc;
}

/* The writes of a signal (buffered, and a wake-up task) into the open
 * transaction, for every client. */
/* Who asked, as a domain event of the session (see engine.h). */
static int record_who(store *st, const char *id, const char *type, const char *name, const char *identity) {
  if (!identity) return 0;
  char *qb = json_quote(identity), *qn = name ? json_quote(name) : NULL;
  char *payload = qn ? util_fmt("{\"by\":%s,\"name\":%s}", qb, qn) : util_fmt("{\"by\":%s}", qb);
  int rc = store_domain_append(st, id, type, util_now_ms(), payload) < 0 ? -1 : 0;
  free(payload);
  free(qb);
  free(qn);
  return rc;
}

static int write_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  if (store_begin(st) != STORE_OK || check_live(st, id, "signal", NULL, err, errlen) != 0) {
    if (store_batch_failed(st)) util_seterr(err, errlen, "%s", store_errmsg(st));
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  int rc = store_signal_put(st, id, name, canon, now) != STORE_OK ||
           store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK ||
           record_who(st, id, "signal.sent", name, identity) != 0;
  free(canon);
  if (rc) util_seterr(err, errlen, "%s", store_errmsg(st));
  return rc ? -1 : 0;
}

static int write_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen) {
  int cancel = 0;
  if (store_begin(st) != STORE_OK || check_live(st, id, "cancellation", &cancel, err, errlen) != 0) {
    if (store_batch_failed(st)) util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  if (cancel == 0 && (store_wf_set_cancel(st, id, 1) != STORE_OK ||
                      store_task_put(st, id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0) != STORE_OK ||
                      record_who(st, id, "cancel.requested", NULL, identity) != 0)) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

/* No wake-up task: the run takes the signal in this same batch (a waiting run
 * is not in memory, and loading it takes what is buffered). */
int engine_signal_local(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  if (check_live(e->st, id, "signal", NULL, err, errlen) != 0) {
    free(canon);
    return -1;
  }
  int rc = store_signal_put(e->st, id, name, canon, util_now_ms()) != STORE_OK ||
           record_who(e->st, id, "signal.sent", name, identity) != 0;
  free(canon);
  if (rc) {
    util_seterr(err, errlen, "%s", store_errmsg(e->st));
    return -1;
  }
  wfrun *r = strmap_get(&e->runs, id);
  if (r) run_evict(r); /* in memory while an activity of it runs: loaded again, it takes the signal */
  run_load_id(e, id);
  return 0;
}

int engine_cancel_local(engine *e, const char *id, const char *identity, char *err, size_t errlen) {
  if (write_cancel(e->st, id, identity, err, errlen) != 0) return -1;
  dispatch_due(e);
  return 0;
}

int engine_cancel_in_batch(engine *e, const char *id, const char *identity, char *err, size_t errlen) {
  if (write_cancel(e->st, id, identity, err, errlen) != 0) return -1;
  engine_touch(e, id);
  dispatch_arm(e, util_now_ms());
  return 0;
}

int engine_send_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                       char *err, size_t errlen) {
  if (write_signal(st, id, name, payload, identity, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  return commit_or_fail(st, err, errlen);
}

int engine_request_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen) {
  if (write_cancel(st, id, identity, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  return commit_or_fail(st, err, errlen);
}

char *engine_input_with_identity(const char *input_json, const char *identity, int required, char *err,
                                 size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return NULL;
  }
  char *out = NULL;
  const char *first = input_json + strspn(input_json, " \t\r\n");
  if (json_decode_safe(L, input_json, strlen(input_json), err, errlen) == 0) {
    int obj = *first == '{'; /* decoded, an empty array and an empty object look alike */
    if (obj) {
      lua_pushstring(L, identity);
      lua_setfield(L, -2, "identity");
    }
    if (obj || !required) {
      size_t len;
      const char *text = json_encode(L, -1, &len);
      out = util_xmalloc(len + 1);
      memcpy(out, text, len + 1);
    } else {
      util_seterr(err, errlen, "the workflow input must be a JSON object (the engine records who started it in "
                  "its \"identity\" field)");
    }
  }
  lua_close(L);
  return out;
}

