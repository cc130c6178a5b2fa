/* cmd_config: `engine config`, every setting's effective value and where it
 * came from (base/config.h), secrets masked. */
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "config.h"
#include "home.h"
#include "json.h"
#include "render.h"
#include "util.h"

static const char *CONFIG_HELP =
    "usage: engine [--config FILE] config [--json] [--db PATH]\n"
    "\n"
    "Prints every setting: its key in the configuration file, its value and where\n"
    "the value came from (default, FILE:LINE, environment, flag). Secrets show as\n"
    "\"(set)\". The file is --config FILE, else $ENGINE_CONFIG, else\n"
    "/etc/engine/engine.conf when it exists; a key that is unknown, of the wrong\n"
    "type or out of range stops every command with the file, the line and the key.\n"
    "The environment variable of a setting (ENGINE_ and the key in capitals; the\n"
    "otel_* keys are the OpenTelemetry variables in capitals, OTEL_*) overrides\n"
    "the file; a flag overrides both. --json: {file, home, settings:\n"
    "[{key, env, value, source, default, reloadable, help}]}. docs/operations.md has the table.\n";

static const char *shown_value(const config_entry *e) {
  if (!e->value) return NULL;
  return e->s->type == SET_SECRET ? "(set)" : e->value;
}

int cmd_config(args *a, common *c) {
  int rc = cli_parse_simple(a, c, CONFIG_HELP, NULL, 0, 0);
  if (rc || c->help) return rc;
  if (strcmp(c->db, c->db_default) != 0) config_flag("db", c->db);
  const char *file = config_file(), *home = engine_home();
  if (c->json) {
    ubuf b = {0};
    char *f = file ? json_quote(file) : util_strdup("null"), *h = home ? json_quote(home) : util_strdup("null");
    char *head = util_fmt("{\"file\":%s,\"home\":%s,\"settings\":[", f, h);
    ubuf_add(&b, head, strlen(head));
    free(head), free(f), free(h);
    for (size_t i = 0; i < SETTINGS_COUNT; i++) {
      config_entry e;
      config_get(i, &e);
      const char *v = shown_value(&e);
      char *key = json_quote(e.s->key), *val = v ? json_quote(v) : util_strdup("null"), *src = json_quote(e.source),
           *dflt = json_quote(e.s->dflt), *help = json_quote(e.s->help);
      char *item = util_fmt("%s{\"key\":%s,\"env\":\"%s\",\"value\":%s,\"source\":%s,\"default\":%s,\"reloadable\":%s,\"help\":%s}",
                            i ? "," : "", key, e.s->env, val, src, dflt, e.s->reloadable ? "true" : "false", help);
      ubuf_add(&b, item, strlen(item));
      free(item), free(key), free(val), free(src), free(dflt), free(help);
    }
    ubuf_add(&b, "]}", 3);
    cli_put_json(stdout, b.p);
    return EXIT_OK;
  }
  render_line(stdout, 0, "configuration file: %s", file ? file : "none (defaults and the environment)");
  render_line(stdout, 0, "engine home: %s (%s)", home ? home : engine_home_error(), engine_home_source());
  size_t wk = 3, wv = 5;
  for (size_t i = 0; i < SETTINGS_COUNT; i++) {
    config_entry e;
    config_get(i, &e);
    const char *v = shown_value(&e);
    if (strlen(e.s->key) > wk) wk = strlen(e.s->key);
    if (v && strlen(v) > wv) wv = strlen(v) > 60 ? 60 : strlen(v);
  }
  render_line(stdout, 0, "%-*s  %-*s  %s", (int)wk, "KEY", (int)wv, "VALUE", "SOURCE");
  for (size_t i = 0; i < SETTINGS_COUNT; i++) {
    config_entry e;
    config_get(i, &e);
    const char *v = shown_value(&e);
    if (v) render_line(stdout, 0, "%-*s  %-*s  %s", (int)wk, e.s->key, (int)wv, v, e.source);
    else render_line(stdout, 0, "%-*s  %-*s  default (%s)", (int)wk, e.s->key, (int)wv, "-", *e.s->dflt ? e.s->dflt : "unset");
  }
  return EXIT_OK;
}
