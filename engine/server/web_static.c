/* web_static: see web_static.h. The files are read for every request (they
 * are small, and an edited file shows at the next reload without a restart);
 * the ETag is a hash of the bytes, so a browser revalidates with
 * If-None-Match and gets 304 without the body. */
#include "web_static.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "home.h"
#include "util.h"

#define WEB_MAX_FILE (4u << 20) /* a page's file is small; anything bigger is not one of ours */

/* No inline script or style, nothing from another origin, no framing, no
 * forms posting anywhere: the page's data is hostile model output, and this
 * is the last line if one of its texts ever reached the DOM as markup. */
#define WEB_CSP                                                                                            \
  "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " \
  "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const char *const WEB_SECURITY_HEADERS[] = {WEB_CSP,
                                            "Referrer-Policy: no-referrer",
                                            "X-Frame-Options: DENY",
                                            "Cross-Origin-Opener-Policy: same-origin",
                                            "Cross-Origin-Resource-Policy: same-origin",
                                            NULL};

void web_static_dir(char *out, size_t n) {
  const char *env = getenv("ENGINE_WEB_DIR");
  if (env && *env) snprintf(out, n, "%s", env);
  else engine_home_path("web", out, n); /* installed: share/engine/web; a build: the source tree's web/ */
}

const char *web_static_type(const char *name) {
  static const char *const TYPES[][2] = {
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const char *dot = strrchr(name, '.');
  if (!dot) return NULL;
  for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++)
    if (strcmp(dot, TYPES[i][0]) == 0) return TYPES[i][1];
  return NULL;
}

int web_static_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 100 || name[0] == '.') return 0;
  return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static void not_found(httpd_req *r, const char *name) {
  char *msg = util_fmt("{\"error\":{\"status\":404,\"message\":\"no such file of the web page: %s\"}}\n",
                       web_static_name_ok(name) ? name : "(not a file name)");
  httpd_respond(r, 404, "application/json", msg, strlen(msg), NULL);
}

void web_static_serve(httpd_req *r, const char *dir, const char *name) {
  const char *type = web_static_type(name);
  if (!web_static_name_ok(name) || !type) return not_found(r, name);
  char path[PATH_MAX + 128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  /* lstat: a symlink planted in the directory does not lead elsewhere */
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)WEB_MAX_FILE) return not_found(r, name);
  size_t len = 0;
  char *body = util_read_file(path, &len);
  if (!body) return not_found(r, name);
  char hash[65], etag[80], inm_buf[80];
  util_sha256_hex(body, len, hash);
  snprintf(etag, sizeof etag, "ETag: \"%.32s\"", hash);
  snprintf(inm_buf, sizeof inm_buf, "\"%.32s\"", hash);
  const char *inm = httpd_header(r, "If-None-Match");
  /* no-cache: kept, but asked again each time (the engine's files change
   * with the engine); the ETag makes asking cheap */
  const char *headers[16] = {etag, "Cache-Control: no-cache"};
  size_t k = 2;
  for (size_t i = 0; WEB_SECURITY_HEADERS[i] && k < 15; i++) headers[k++] = WEB_SECURITY_HEADERS[i];
  headers[k] = NULL;
  if (inm && strstr(inm, inm_buf)) {
    free(body);
    return httpd_respond(r, 304, NULL, NULL, 0, headers);
  }
  httpd_respond(r, 200, type, body, len, headers);
}
