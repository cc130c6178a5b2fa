/* output: what every command prints through. Every line for people goes out
 * through render_line (render.h): what a sandbox, a model or the log wrote
 * never reaches the terminal raw. JSON goes out through cli_put_json. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "json.h"
#include "render.h"
#include "util.h"

int cli_die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  va_end(ap);
  render_line(stderr, DIE_MAX, "engine: %s", msg ? msg : "out of memory");
  free(msg);
  return code;
}

void cli_put_json(FILE *f, char *json) {
  char *out = json_for_output(json ? json : "null", json ? strlen(json) : 4);
  fprintf(f, "%s\n", out);
  free(out);
  free(json);
}

int cli_check_color(const common *c) {
  pretty_color mode;
  if (!c->color || pretty_color_parse(c->color, &mode) == 0) return 0;
  return cli_die(EXIT_USAGE, "--color must be auto, always or never, not '%s'", c->color);
}

int cli_human_stdout(const common *c) { return !c->json && isatty(STDOUT_FILENO); }

int cli_color_on(const common *c, int fd) {
  pretty_color mode = PRETTY_COLOR_AUTO;
  if (c->color) pretty_color_parse(c->color, &mode);
  return pretty_color_on(mode, fd);
}

pretty_opts cli_stdout_layout(const common *c) {
  return pretty_defaults(pretty_width(STDOUT_FILENO), cli_color_on(c, STDOUT_FILENO));
}

/* ---------------------------------------------------------------- events --- */

static void live_close(cli_printer *p) {
  if (!p->live_open) return;
  fputc('\n', p->out);
  p->live_open = 0;
}

void cli_print_event(void *printer, const domain_event *e) {
  cli_printer *p = printer;
  live_close(p);
  if (p->json) {
    cli_put_json(p->out, view_event_json(e));
  } else if (p->lay) { /* a terminal, or --full: its transcript rows */
    char *rows = view_event_transcript(e, p->lay);
    fputs(rows, p->out);
    free(rows);
  } else {
    char *line = view_event_line(e);
    fprintf(p->out, "%s\n", line);
    free(line);
  }
  if (p->flush) fflush(p->out);
}

/* The text of an agent.delta's payload on the step's live line. */
void cli_print_live(void *printer, const char *payload, size_t n) {
  cli_printer *p = printer;
  int64_t step = 0;
  char *text = p->json ? NULL : view_live_text(payload, n, &step);
  if (!text) return;
  if (p->live_open && step != p->live_step) live_close(p);
  if (!p->live_open) {
    char *head = view_live_head(step);
    fputs(head, p->out);
    free(head);
    p->live_open = 1;
    p->live_step = step;
  }
  fputs(text, p->out);
  fflush(p->out);
  free(text);
}

void cli_print_end(cli_printer *p) {
  live_close(p);
  fflush(p->out);
}
