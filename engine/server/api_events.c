/* api_events: the events of a workflow (GET /v1/workflows/{id}/events) and
 * of all of them (GET /v1/events): a page of JSON, or with Accept:
 * text/event-stream a live stream (api_stream.c) from where the client
 * resumes. */
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

/* ------------------------------------------------------------ events --- */

/* Last-Event-ID (a reconnecting EventSource), else ?after=, else 0. */
static int resume_point(httpd_req *r, int64_t *after) {
  const char *last = httpd_header(r, "Last-Event-ID");
  if (last && *last) {
    char *end;
    long long v = strtoll(last, &end, 10);
    if (*end || v < 0) {
      api_reply_error(r, 400, "Last-Event-ID must be the id of an event this stream sent (a whole number)");
      return -1;
    }
    *after = v;
    return 0;
  }
  return api_query_int(r, "after", 0, INT64_MAX / 2, after);
}

static int wants_stream(httpd_req *r) {
  const char *acc = httpd_header(r, "Accept");
  return acc && strstr(acc, "text/event-stream") != NULL;
}

typedef struct json_page {
  ubuf b;
  int n, limit;
  int64_t last;
} json_page;

static int page_event(void *ud, const domain_event *e) {
  json_page *p = ud;
  if (p->n == p->limit) return 1;
  char *json = view_event_json(e);
  if (p->n) ubuf_add(&p->b, ",", 1);
  ubuf_add(&p->b, json, strlen(json));
  free(json);
  p->n++;
  p->last = e->seq;
  return 0;
}

static int page_feed(void *ud, int64_t id, const domain_event *e) {
  json_page *p = ud;
  char *json = view_event_json(e);
  /* the feed position rides along: it is what ?after= takes */
  char *item = util_fmt("%s{\"id\":%lld,\"event\":%s}", p->n ? "," : "", (long long)id, json);
  ubuf_add(&p->b, item, strlen(item));
  free(item);
  free(json);
  p->n++;
  p->last = id;
  return 0;
}

void api_h_events(api *a, httpd_req *r, ctx *c) {
  wf_row w;
  int64_t after, limit;
  if (resume_point(r, &after) != 0 || api_query_int(r, "limit", 1000, 10000, &limit) != 0) return;
  if (!api_find_for_read(a, r, c->p1, &w)) return;
  if (!wants_stream(r)) {
    json_page p = {{0}, 0, limit ? (int)limit : 1, after};
    ubuf_add(&p.b, "{\"events\":[", 11);
    int rc = store_domain_list(a->rd, c->p1, after, page_event, &p);
    if (rc != STORE_OK) {
      ubuf_free(&p.b);
      wf_row_free(&w);
      return api_reply_read_error(a, r, a->rd, rc);
    }
    char *tail = util_fmt("],\"last_seq\":%lld,\"status\":\"%s\"}", (long long)p.last, w.status);
    ubuf_add(&p.b, tail, strlen(tail) + 1);
    free(tail);
    wf_row_free(&w);
    return api_reply_json(r, 200, p.b.p, NULL);
  }
  streams_open(a->streams, r, c->p1, after, engine_status_terminal(w.status) ? w.status : NULL);
  wf_row_free(&w);
}

void api_h_all_events(api *a, httpd_req *r, ctx *c) {
  (void)c;
  int64_t after, limit;
  if (resume_point(r, &after) != 0 || api_query_int(r, "limit", 1000, 10000, &limit) != 0) return;
  if (!wants_stream(r)) {
    json_page p = {{0}, 0, 0, after};
    ubuf_add(&p.b, "{\"events\":[", 11);
    if (store_feed_after(a->rd, after, limit ? (int)limit : 1, page_feed, &p) != STORE_OK) {
      ubuf_free(&p.b);
      return api_reply_store_error(a, r, a->rd);
    }
    /* end_id: where a client that wants only what comes next streams from */
    int64_t end = store_feed_last(a->rd);
    if (end < 0) {
      ubuf_free(&p.b);
      return api_reply_store_error(a, r, a->rd);
    }
    char *tail = util_fmt("],\"last_id\":%lld,\"end_id\":%lld}", (long long)p.last, (long long)end);
    ubuf_add(&p.b, tail, strlen(tail) + 1);
    free(tail);
    return api_reply_json(r, 200, p.b.p, NULL);
  }
  streams_open(a->streams, r, NULL, after, NULL);
}
