/* tasks: the timer of the due tasks. A task written to fall due later and
 * the timer armed to fire by then are one call (tasks_put, or tasks_arm
 * after a task written with more fields); what runs when it fires is
 * dispatch.c's, registered once at start-up (tasks_on_due), so the files
 * below dispatch never call it. */
#include "worker.h"

static void on_task_timer(uv_timer_t *t) {
  engine *e = t->data;
  e->task_timer_at = 0;
  if (e->on_due) e->on_due(e);
}

void tasks_on_due(engine *e, void (*fn)(engine *)) { e->on_due = fn; }

void tasks_arm(engine *e, int64_t at) {
  if (e->stopping || e->recovering) return;
  if (e->task_timer_at && e->task_timer_at <= at && uv_is_active((uv_handle_t *)&e->task_timer)) return;
  /* at least 1 ms: libuv (1.44) runs a 0 ms timer started from its own
   * callback again at once, without polling for I/O or signals */
  int64_t delay = at - util_now_ms();
  if (delay < 1) delay = 1;
  e->task_timer_at = at;
  uv_timer_start(&e->task_timer, on_task_timer, (uint64_t)delay, 0);
}

/* The timer is due now (it has not fired yet: a 1 ms timer, or one the
 * loop has not come to): it fires here. */
void tasks_fire_due(engine *e) {
  if (!uv_is_active((uv_handle_t *)&e->task_timer) || !e->task_timer_at || e->task_timer_at > util_now_ms()) return;
  uv_timer_stop(&e->task_timer);
  on_task_timer(&e->task_timer);
}

void tasks_disarm(engine *e) {
  uv_timer_stop(&e->task_timer);
  e->task_timer_at = 0;
}

int tasks_put(engine *e, const char *wf_id, const char *kind, int64_t seq, int64_t at) {
  if (store_task_put(e->st, wf_id, kind, seq, at, 0, 0, NULL, 0) != STORE_OK) return -1;
  tasks_arm(e, at);
  return 0;
}
