/* args: a command's arguments (flags, positional arguments, --help) and
 * --input, read and checked before anything is opened. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_internal.h"
#include "home.h"
#include "json.h"
#include "util.h"

const char *cli_default_db(void) {
  const char *e = getenv("ENGINE_DB");
  return e && *e ? e : "engine.db";
}

const char *cli_workflows_dir(void) {
  static char dir[PATH_MAX];
  const char *e = getenv("ENGINE_WORKFLOWS_DIR");
  struct stat st;
  if (e && *e) return e;
  if (stat("workflows", &st) == 0 && S_ISDIR(st.st_mode)) return "workflows";
  if (!*engine_home_path("workflows", dir, sizeof dir)) return "workflows"; /* no home: the error names ./workflows */
  return dir;
}

int cli_is_flag(const char *a, const char *name) { return strcmp(a, name) == 0; }

const char *cli_flag_value(args *a, const char *name, int *err) {
  const char *cur = a->argv[a->i];
  size_t n = strlen(name);
  if (strncmp(cur, name, n) != 0) return NULL;
  if (cur[n] == '=') return cur + n + 1;
  if (cur[n] != 0) return NULL;
  if (a->i + 1 >= a->argc) {
    fprintf(stderr, "engine: %s needs a value\n", name);
    *err = 1;
    return NULL;
  }
  return a->argv[++a->i];
}

int cli_asks_help(const args *a) {
  for (int i = a->i; i < a->argc; i++)
    if (cli_is_flag(a->argv[i], "--help") || cli_is_flag(a->argv[i], "-h")) return 1;
  return 0;
}

int cli_parse_simple(args *a, common *c, const char *help, const char **pos, int npos, int minpos) {
  int bad = 0, n = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if ((v = cli_flag_value(a, "--color", &bad))) c->color = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) {
      fputs(help, stdout);
      c->help = 1;
      return EXIT_OK;
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "unknown option %s (see --help)", cur);
    else if (n < npos) pos[n++] = cur;
    else return cli_die(EXIT_USAGE, "unexpected argument %s (see --help)", cur);
  }
  if (n < minpos) {
    fputs(help, stderr);
    return EXIT_USAGE;
  }
  return cli_check_color(c);
}

/* Reads --input @file into *text: a regular file, or a pipe or terminal
 * (`@/dev/stdin`, `@<(cmd)`), never more than the payload limit (a regular
 * file's size is known before a byte is read). Opened without blocking, so a
 * FIFO nobody writes to does not hang the open. */
static int read_input_file(const char *flag, const char *path, char **text, size_t *len) {
  size_t max = json_max_payload();
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return cli_die(EXIT_USAGE, "%s: cannot read %s: %s", flag, path, strerror(e));
  }
  int piped = S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode);
  if (!S_ISREG(sb.st_mode) && !piped) {
    close(fd);
    return cli_die(EXIT_USAGE, "%s: %s is %s, not a file", flag, path, util_file_kind(sb.st_mode));
  }
  if (S_ISREG(sb.st_mode) && (size_t)sb.st_size > max) {
    close(fd);
    return cli_die(EXIT_USAGE, "%s %s is %lld bytes, more than the limit of %zu bytes (ENGINE_MAX_PAYLOAD_BYTES)", flag,
                   path, (long long)sb.st_size, max);
  }
  if (piped) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); /* a pipe is read as it comes */
  ubuf b = {0};
  int e = util_read_fd(fd, max, &b);
  close(fd);
  if (e) {
    ubuf_free(&b);
    if (e == EFBIG)
      return cli_die(EXIT_USAGE, "%s %s is more than the limit of %zu bytes (ENGINE_MAX_PAYLOAD_BYTES)", flag, path, max);
    return cli_die(EXIT_USAGE, "%s: cannot read %s: %s", flag, path, strerror(e));
  }
  *len = b.n;
  *text = b.p ? b.p : util_strdup("");
  return 0;
}

int cli_read_input(const char *spec, char **out) { return cli_read_json("--input", spec, out); }

int cli_read_json(const char *flag, const char *spec, char **out) {
  char err[512];
  char *text = NULL;
  size_t len = 0;
  if (spec[0] == '@') {
    int rc = read_input_file(flag, spec + 1, &text, &len);
    if (rc) return rc;
  } else {
    text = util_strdup(spec);
    len = strlen(text);
  }
  *out = json_accept(text, len, flag, err, sizeof err);
  free(text);
  return *out ? 0 : cli_die(EXIT_USAGE, "%s", err);
}
