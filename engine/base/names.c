/* names: the checks of ids and signal names, and the terminal statuses. */
#include "names.h"

#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "util.h"

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

int engine_reserved_signal(const char *name, char *err, size_t errlen) {
  if (strncmp(name, "child:", 6) == 0) {
    util_seterr(err, errlen, "signals named child:* are the engine's: a child workflow's end reaches its parent "
                "under that name (wf.child)");
    return 1;
  }
  if (strncmp(name, "session:", 8) != 0) return 0;
  util_seterr(err, errlen, "session signals are sent as what they are (engine message, interrupt or close, or POST "
              "/v1/workflows/{id}/messages), so the session knows who sent them");
  return 1;
}

int engine_status_terminal(const char *s) {
  return strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0;
}
