/* api_scripts: GET /v1/workflow-scripts and /v1/workflow-scripts/{name}:
 * the workflow scripts a start may name, each with its description (the
 * script's opening comment block) and the input schema it declares with a
 * line `-- input schema: PATH` in that block (PATH relative to the script's
 * folder; docs/workflows.md "Declaring the input"). Nothing runs: the files
 * are read at each request, like the page's, so an edit shows without a
 * restart. A schema that cannot be used is said in input_schema_error, never
 * a 500: one bad file does not hide the other scripts. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_internal.h"
#include "json.h"

#define SCRIPT_HEAD_MAX (64u << 10)  /* the opening comment is read from the first 64 KiB */
#define DESCRIPTION_MAX 4000         /* bytes of description kept */
#define SCHEMA_MAX (1u << 20)        /* an input schema past 1 MiB is refused */
#define SCRIPTS_MAX 1000             /* scripts listed at most */
static const char SCHEMA_LINE[] = "input schema:";

/* The opening comment block of the script's first SCRIPT_HEAD_MAX bytes:
 * its `--` lines without the dashes (and one space), the input schema line
 * taken out into *schema_path (malloc'd, or NULL). Returns the description
 * (malloc'd, maybe ""), or NULL when the file cannot be read as a script. */
static char *read_head(const char *path, char **schema_path) {
  *schema_path = NULL;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL; /* never a FIFO or a device */
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = util_xmalloc(SCRIPT_HEAD_MAX + 1);
  size_t n = fread(buf, 1, SCRIPT_HEAD_MAX, f);
  fclose(f);
  buf[n] = 0;
  ubuf d = {0};
  char *line = buf;
  while (line && *line) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    size_t len = strlen(line);
    if (len && line[len - 1] == '\r') line[--len] = 0;
    if (strncmp(line, "--", 2) != 0 || strncmp(line, "--[[", 4) == 0) break;
    const char *t = line + 2;
    if (*t == ' ') t++;
    if (strncmp(t, SCHEMA_LINE, sizeof SCHEMA_LINE - 1) == 0) {
      const char *p = t + sizeof SCHEMA_LINE - 1;
      p += strspn(p, " \t");
      size_t pl = strlen(p);
      while (pl && (p[pl - 1] == ' ' || p[pl - 1] == '\t')) pl--;
      if (!*schema_path) *schema_path = util_fmt("%.*s", (int)(pl < 300 ? pl : 300), p);
    } else if (d.n < DESCRIPTION_MAX) {
      ubuf_add(&d, t, strlen(t));
      ubuf_add(&d, "\n", 1);
    }
    line = nl ? nl + 1 : NULL;
  }
  free(buf);
  while (d.n && d.p[d.n - 1] == '\n') d.n--; /* no trailing blank lines */
  if (d.n > DESCRIPTION_MAX) {
    d.n = DESCRIPTION_MAX;
    while (d.n && ((unsigned char)d.p[d.n] & 0xC0) == 0x80) d.n--; /* on a UTF-8 boundary */
  }
  ubuf_add(&d, "", 1);
  return d.p;
}

/* The declared schema's JSON text (malloc'd), or NULL with why. rel is the
 * script's line, resolved against dir (the script's folder). */
static char *read_schema(const char *dir, const char *rel, char *why, size_t whyn) {
  size_t len = strlen(rel);
  const char *bad = NULL;
  if (len == 0) bad = "it names no file";
  else if (len > 200) bad = "the path is longer than 200 bytes";
  else if (rel[0] == '/') bad = "the path is absolute (it is relative to the script's folder)";
  else if (len < 6 || strcmp(rel + len - 5, ".json") != 0) bad = "the file's name does not end in .json";
  else if (strspn(rel, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-") != len)
    bad = "only A-Z a-z 0-9 . _ - and / are allowed in the path";
  if (bad) {
    snprintf(why, whyn, "the script's input schema line is not valid: %s", bad);
    return NULL;
  }
  char path[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(why, whyn, "the input schema %s is not a file beside the script", rel);
    return NULL;
  }
  if (st.st_size > (off_t)SCHEMA_MAX) {
    snprintf(why, whyn, "the input schema %s is %lld bytes, over the limit of %u", rel, (long long)st.st_size,
             SCHEMA_MAX);
    return NULL;
  }
  size_t n = 0;
  char *text = util_read_file(path, &n);
  if (!text) {
    snprintf(why, whyn, "the input schema %s cannot be read", rel);
    return NULL;
  }
  char err[300];
  char *canon = json_accept(text, n, "the input schema", err, sizeof err);
  const char *first = text + strspn(text, " \t\r\n");
  if (!canon || *first != '{') {
    snprintf(why, whyn, "the input schema %s is not a JSON object%s%s", rel, canon ? "" : ": ", canon ? "" : err);
    free(canon);
    free(text);
    return NULL;
  }
  free(canon);
  return text; /* as written: its properties keep their order, which a form follows */
}

/* One script as JSON (malloc'd), or NULL when it is not a readable file. */
static char *script_json(api *a, const char *name, const char *path) {
  char *schema_path = NULL;
  char *desc = read_head(path, &schema_path);
  if (!desc) return NULL;
  char *schema = NULL, why[600] = "";
  if (schema_path) {
    /* relative to the script's own folder (a name like triggers/x.lua) */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", a->workflows_dir, name);
    char *slash = strrchr(dir, '/');
    *slash = 0;
    schema = read_schema(dir, schema_path, why, sizeof why);
  }
  char *qn = json_quote(name), *qd = json_quote(desc), *qf = schema_path ? json_quote(schema_path) : NULL,
       *qw = *why ? json_quote(why) : NULL;
  char *out = util_fmt("{\"name\":%s,\"description\":%s,\"input_schema_file\":%s,\"input_schema\":%s,"
                       "\"input_schema_error\":%s}",
                       qn, qd, qf ? qf : "null", schema ? schema : "null", qw ? qw : "null");
  free(qn);
  free(qd);
  free(qf);
  free(qw);
  free(schema);
  free(schema_path);
  free(desc);
  return out;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

void api_h_scripts(api *a, httpd_req *r, ctx *c) {
  (void)c;
  if (!a->workflows_dir)
    return api_reply_json(r, 200, util_strdup("{\"workflows_dir\":null,\"scripts\":[]}"), NULL);
  DIR *d = opendir(a->workflows_dir);
  if (!d) return api_reply_error(r, 503, "the workflows directory %s cannot be read now", a->workflows_dir);
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  char msg[PATH_MAX + 256], path[PATH_MAX + 300];
  while ((e = readdir(d)) && n < SCRIPTS_MAX) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0) continue;
    /* the names a start accepts, resolving inside the directory */
    if (api_script_path(a, e->d_name, path, sizeof path, msg, sizeof msg) != 0) continue;
    if (n == cap) names = util_xrealloc(names, (cap = cap ? cap * 2 : 32) * sizeof *names);
    names[n++] = util_strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  ubuf b = {0};
  char *qd = json_quote(a->workflows_dir);
  char *head = util_fmt("{\"workflows_dir\":%s,\"scripts\":[", qd);
  free(qd);
  ubuf_add(&b, head, strlen(head));
  free(head);
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", a->workflows_dir, names[i]);
    char *item = script_json(a, names[i], path);
    if (item) {
      if (k++) ubuf_add(&b, ",", 1);
      ubuf_add(&b, item, strlen(item));
      free(item);
    }
    free(names[i]);
  }
  free(names);
  ubuf_add(&b, "]}", 3);
  api_reply_json(r, 200, b.p, NULL);
}

void api_h_script(api *a, httpd_req *r, ctx *c) {
  char path[PATH_MAX], msg[PATH_MAX + 256];
  int rc = api_script_path(a, c->p1, path, sizeof path, msg, sizeof msg);
  if (rc != 0) return api_reply_error(r, rc == -2 ? 404 : 400, "%s", msg);
  char *item = script_json(a, c->p1, path);
  if (!item) return api_reply_error(r, 404, "workflow script '%s' is not a readable file", c->p1);
  api_reply_json(r, 200, item, NULL);
}
