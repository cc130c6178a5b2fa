/* pretty: results laid out for a person at a terminal. JSON as indented text
 * folded to the terminal's width (a value that fits stays on one line; deeper
 * levels and long lists are summarised; long strings are cut with the number
 * of bytes left out, never inside a character or an escape), and a finished
 * workflow's outcome in a few lines: status, summary, verdict, usage,
 * artifacts, and a table of findings. Text from the data goes through
 * render.h, so nothing in it reaches the terminal as a control character;
 * colour is only the SGR codes this module writes itself (bold, dim, red,
 * green, yellow, cyan, reset). Machine output (--json, a pipe) never comes
 * here: it stays as json_for_output prints it. */
#ifndef ENGINE_PRETTY_H
#define ENGINE_PRETTY_H

#include <stddef.h>

#include "util.h"

/* --color=auto|always|never. auto: colour when the output is a terminal, and
 * NO_COLOR is unset or empty, and TERM is not "dumb". */
typedef enum pretty_color { PRETTY_COLOR_AUTO = 0, PRETTY_COLOR_ALWAYS, PRETTY_COLOR_NEVER } pretty_color;

/* Parses "auto", "always" or "never" into *out: 0, or -1 for anything else. */
int pretty_color_parse(const char *s, pretty_color *out);
/* Whether output to fd gets colour under mode. */
int pretty_color_on(pretty_color mode, int fd);
/* The columns of the terminal at fd (TIOCGWINSZ), else $COLUMNS, else 80;
 * never less than 20. */
size_t pretty_width(int fd);

typedef struct pretty_opts {
  size_t width;      /* columns a line should fit in */
  int color;         /* write SGR codes */
  int max_depth;     /* containers laid out over lines down to this level; deeper ones that do not fit
                        on the line are shown as {...N keys} / [...N items] */
  size_t max_items;  /* members of a container shown; the rest as "... N more items" */
  size_t max_string; /* columns of a string's text inside a one-line container before it is cut */
} pretty_opts;

/* The layout `engine show` and `engine start` use on a terminal this wide. */
pretty_opts pretty_defaults(size_t width, int color);

/* Appends json[0..n) as folded JSON to out: the value starts at column col of
 * the line out ends with, and its lines after the first are indented to col
 * (members 2 further per level). No newline at the end. Returns 0, or -1 with
 * nothing added when the text is not one JSON value. */
int pretty_json(ubuf *out, const char *json, size_t n, size_t col, const pretty_opts *o);

/* A finished workflow's outcome for people, from its summary (the JSON
 * `show --json` prints, GET /v1/workflows/ID): id and status; for an agent
 * session's result (summary, turns, tool_calls, tokens...) its summary,
 * verdict, usage and findings (a table of severity, file:line and title);
 * other results folded as JSON; the artifacts with where they are stored.
 * Lines end in newlines. Malloc'd; NULL when json is not a summary. */
char *pretty_outcome(const char *json, size_t n, const pretty_opts *o);
/* A review ({summary, verdict, findings}, or a session result's shape) as
 * the outcome shows it: summary, verdict and the findings table, on lines
 * without a newline at the end. Malloc'd. */
char *pretty_review(const char *json, size_t n, const pretty_opts *o);

/* The tone of a table's cell: its colour on a terminal. */
typedef enum pretty_tone { PRETTY_PLAIN = 0, PRETTY_GOOD, PRETTY_WARN, PRETTY_BAD, PRETTY_QUIET } pretty_tone;
typedef struct pretty_cell {
  const char *text;
  pretty_tone tone;
} pretty_cell;

/* A table for people: the header (bold) over nrows rows of ncols cells each
 * (cells[r * ncols + c]), their text rendered (render.h). Each column but the
 * last is as wide as its widest cell, up to a third of o->width (a longer
 * cell shows its end), and two spaces apart; the last column's text wraps at
 * spaces to o->width, its further lines indented to its column. Lines end
 * in newlines. Malloc'd. */
char *pretty_table(const char *const *header, size_t ncols, const pretty_cell *cells, size_t nrows,
                   const pretty_opts *o);

#endif
