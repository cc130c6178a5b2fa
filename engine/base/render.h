/* render: text for people. Whatever a sandbox, a model, a workflow script or
 * an old database wrote reaches a terminal with nothing in it that the
 * terminal would act on: control characters and DEL become \xHH (\n, \t, \r
 * for the usual three), C1 controls (U+0080-U+009F) and the bidi controls
 * that reorder a line become \uHHHH, and bytes that are not UTF-8 become \xHH
 * each. Everything else, backslashes included, is shown as it is: the aim is a
 * screen that cannot be steered, not a reversible encoding. Every human output
 * of the CLI goes through here; JSON output goes through json_for_output. */
#ifndef ENGINE_RENDER_H
#define ENGINE_RENDER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

enum {
  RENDER_MULTILINE = 1, /* keep \n and \t as they are: a field printed over several lines on purpose */
};

/* Appends s[0..n) rendered to b, in at most max bytes (0: no limit); cut text
 * ends with "..." inside max, and never in the middle of an escape or of a
 * character. */
void render_add(ubuf *b, const char *s, size_t n, int flags, size_t max);

/* s[0..n) rendered into out[outlen] (always NUL-terminated, cut with "..." to
 * fit); returns out. */
const char *render_buf(char *out, size_t outlen, const char *s, size_t n, int flags);

/* The C string s rendered, malloc'd (max as for render_add). */
char *render_str(const char *s, int flags, size_t max);

/* Formats one line, renders it (a newline inside becomes \n) in at most max
 * bytes (0: no limit) and writes it to f followed by a newline. */
void render_line(FILE *f, size_t max, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void render_vline(FILE *f, size_t max, const char *fmt, va_list ap);

#endif
