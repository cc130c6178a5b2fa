/* web_static: the web page's files (web/ of the repository, installed to
 * share/engine/web beside the binary) served at GET / and GET /web/NAME, with
 * exact content types, an ETag for revalidation and a strict
 * Content-Security-Policy. No token is needed for them: the page asks for one
 * and every data call it makes goes through the API's own checks. */
#ifndef ENGINE_WEB_STATIC_H
#define ENGINE_WEB_STATIC_H

#include <stddef.h>

#include "httpd.h"

/* The directory the files come from: $ENGINE_WEB_DIR, else
 * <binary>/../share/engine/web when it has index.html, else the source
 * tree's web/. Written to out (n bytes). */
void web_static_dir(char *out, size_t n);

/* The content type of a file name by its extension, or NULL for one that is
 * not served (only .html .css .js .svg .png .ico .json .txt are). */
const char *web_static_type(const char *name);

/* Whether name is a plain file name the page may have: 1-100 bytes of
 * A-Z a-z 0-9 . _ -, not starting with a dot (so no "..", no "/"). */
int web_static_name_ok(const char *name);

/* Answers r with dir/name (name already percent-decoded): 200 with the file,
 * 304 when If-None-Match names its ETag, 404 for a name that is not served
 * or not there. */
void web_static_serve(httpd_req *r, const char *dir, const char *name);

/* The headers every page and file of it carries (CSP, nosniff, no referrer,
 * no framing), NULL-terminated. */
extern const char *const WEB_SECURITY_HEADERS[];

#endif
