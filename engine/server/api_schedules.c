/* api_schedules: the routes of /v1/schedules: list, show, create, pause,
 * resume, trigger and delete a schedule, each write answered once committed
 * with the schedule as it is then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

/* ----------------------------------------------------------- schedules --- */

static int schedule_item(void *ud, const schedule_row *r) {
  api_items_add(ud, schedule_json(r));
  return 0;
}

void api_h_schedules(api *a, httpd_req *r, ctx *c) {
  (void)c;
  json_items x = {{0}, 0};
  api_reply_items(a, r, "schedules", &x, store_schedule_list(a->rd, schedule_item, &x));
}

void api_h_schedule(api *a, httpd_req *r, ctx *c) {
  json_items x = {{0}, 0};
  int found = store_schedule_get(a->rd, c->p1, schedule_item, &x);
  if (found < 0) return api_reply_store_error(a, r, a->rd);
  if (found == 0) return api_reply_error(r, 404, "unknown schedule '%.80s'", c->p1);
  ubuf_add(&x.b, "", 1);
  api_reply_json(r, 200, x.b.p, NULL);
}

/* A schedule write answered once committed: the schedule as it is then. */
static void schedule_written(api *a, httpd_req *r, int status, const char *name, int rc, const char *err) {
  if (rc != 0) {
    if (api_store_down(a, r)) return;
    if (rc == SCHEDULE_UNKNOWN) return api_reply_error(r, 404, "unknown schedule '%.80s'", name);
    return api_reply_error(r, rc == SCHEDULE_TAKEN ? 409 : 400, "%s", err);
  }
  schedules_poke(a->schedules);
  json_items x = {{0}, 0};
  store_schedule_get(engine_store(a->e), name, schedule_item, &x); /* from the batch: not committed yet */
  ubuf_add(&x.b, "", 1);
  char location[SCHEDULE_NAME_MAX + 32];
  snprintf(location, sizeof location, "/v1/schedules/%s", name);
  api_answer_when_committed(a, r, status, x.n ? x.b.p : util_fmt("{\"name\":\"%s\",\"deleted\":true}", name), NULL,
                            status == 201 ? location : NULL);
  if (!x.n) ubuf_free(&x.b);
}

static const char *SCHEDULE_KEYS[] = {"name", "cron", "tz", "workflow", "input", "overlap", "catchup_window",
                                      "jitter", NULL};

void api_h_schedule_create(api *a, httpd_req *r, ctx *c) {
  (void)c;
  if (api_body_object(a, r, SCHEDULE_KEYS) != 0) return;
  char name[SCHEDULE_NAME_MAX + 1], cron[256], tz[128], workflow[256], overlap[32], catchup[32], jitter[32], err[1024];
  char path[PATH_MAX], why[PATH_MAX + 256];
  struct {
    const char *key;
    char *out;
    size_t n;
    int required;
  } f[] = {{"name", name, sizeof name, 1},   {"cron", cron, sizeof cron, 1},
           {"tz", tz, sizeof tz, 0},         {"workflow", workflow, sizeof workflow, 1},
           {"overlap", overlap, sizeof overlap, 0}, {"catchup_window", catchup, sizeof catchup, 0},
           {"jitter", jitter, sizeof jitter, 0}};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    int got = api_field_string(a, f[i].key, f[i].out, f[i].n);
    if (got < 0 || (got == 0 && f[i].required))
      return api_reply_error(r, 400, "\"%s\" %s a string of at most %zu bytes", f[i].key,
                             got == 0 ? "is required:" : "must be", f[i].n - 1);
    if (got == 0) *f[i].out = 0;
  }
  if (api_script_path(a, workflow, path, sizeof path, why, sizeof why) != 0) return api_reply_error(r, 400, "%s", why);
  char *input = api_field_json(a, "input");
  schedule_spec sp = {name, cron, *tz ? tz : NULL, path, input ? input : "{}", *overlap ? overlap : NULL,
                      SCHEDULE_DEFAULT_CATCHUP_MS, 0};
  const char *bad = *catchup && schedule_parse_duration(catchup, &sp.catchup_window_ms, err, sizeof err) != 0
                        ? "catchup_window"
                    : *jitter && schedule_parse_duration(jitter, &sp.jitter_ms, err, sizeof err) != 0 ? "jitter"
                                                                                                        : NULL;
  if (bad) {
    free(input);
    return api_reply_error(r, 400, "%s: %s", bad, err);
  }
  int64_t now = util_now_ms();
  int rc = schedule_check(&sp, now, err, sizeof err);
  if (rc == 0) rc = schedule_create_in(engine_store(a->e), &sp, now, err, sizeof err);
  free(input);
  schedule_written(a, r, 201, name, rc, err);
}

static void h_schedule_action(api *a, httpd_req *r, ctx *c, const char *action) {
  char err[1024], id[ENGINE_ID_MAX + 1];
  int64_t now = util_now_ms();
  store *st = engine_store(a->e);
  if (strcmp(action, "trigger") == 0) {
    int rc = schedule_trigger_in(a->e, c->p1, c->identity, now, id, sizeof id, err, sizeof err);
    if (rc != 0) return schedule_written(a, r, 202, c->p1, rc, err);
    char location[ENGINE_ID_MAX + 32];
    snprintf(location, sizeof location, "/v1/workflows/%s", id);
    return api_answer_when_committed(a, r, 202, NULL, id, location);
  }
  int rc = strcmp(action, "delete") == 0 ? schedule_delete_in(st, c->p1, err, sizeof err)
                                         : schedule_set_paused_in(st, c->p1, strcmp(action, "pause") == 0, now, err,
                                                                  sizeof err);
  schedule_written(a, r, 200, c->p1, rc, err);
}

void api_h_schedule_pause(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "pause"); }
void api_h_schedule_resume(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "resume"); }
void api_h_schedule_trigger(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "trigger"); }
void api_h_schedule_delete(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "delete"); }
