/* Unit tests for engine/web_static: which names are files of the web page,
 * the content type each gets, and where the files are looked for. Serving
 * itself (headers, 304, traversal over HTTP) is tests/integration/test_web.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web_static.h"

static void test_names(void **state) {
  (void)state;
  const char *good[] = {"index.html", "app.js", "style.css", "favicon.svg", "a-b_c.1.js", NULL};
  for (const char **g = good; *g; g++) assert_true(web_static_name_ok(*g));
  const char *bad[] = {"",       ".",        "..",      ".hidden.js", "../app.js", "a/b.js", "/etc/passwd",
                       "a b.js", "a%2fb.js", "a\\b.js", "app.js\n",   NULL};
  for (const char **b = bad; *b; b++) {
    if (web_static_name_ok(*b)) fail_msg("'%s' taken as a file name", *b);
  }
  char longname[120];
  memset(longname, 'a', sizeof longname);
  strcpy(longname + 101 - 3, ".js"); /* 101 bytes */
  assert_false(web_static_name_ok(longname));
  longname[97] = 0;
  strcat(longname, ".js"); /* 100 bytes */
  assert_true(web_static_name_ok(longname));
}

static void test_types(void **state) {
  (void)state;
  assert_string_equal(web_static_type("index.html"), "text/html; charset=utf-8");
  assert_string_equal(web_static_type("app.js"), "text/javascript; charset=utf-8");
  assert_string_equal(web_static_type("style.css"), "text/css; charset=utf-8");
  assert_string_equal(web_static_type("favicon.svg"), "image/svg+xml");
  assert_string_equal(web_static_type("x.json"), "application/json");
  /* anything else is not served: no guessing, no application/octet-stream */
  assert_null(web_static_type("x.sh"));
  assert_null(web_static_type("x.js.map"));
  assert_null(web_static_type("x.HTML"));
  assert_null(web_static_type("Makefile"));
}

static void test_csp(void **state) {
  (void)state;
  int csp = 0;
  for (size_t i = 0; WEB_SECURITY_HEADERS[i]; i++) {
    if (strncmp(WEB_SECURITY_HEADERS[i], "Content-Security-Policy: ", 25) != 0) continue;
    csp = 1;
    const char *v = WEB_SECURITY_HEADERS[i] + 25;
    assert_non_null(strstr(v, "default-src 'none'"));
    assert_non_null(strstr(v, "script-src 'self'"));
    assert_null(strstr(v, "unsafe-inline"));
    assert_null(strstr(v, "unsafe-eval"));
    assert_null(strstr(v, "http"));
  }
  assert_true(csp);
}

static void test_dir(void **state) {
  (void)state;
  char d[4096];
  setenv("ENGINE_WEB_DIR", "/somewhere/web", 1);
  web_static_dir(d, sizeof d);
  assert_string_equal(d, "/somewhere/web");
  unsetenv("ENGINE_WEB_DIR");
  web_static_dir(d, sizeof d); /* not installed beside the test binary: the source tree's */
  assert_non_null(strstr(d, "/web"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_names), cmocka_unit_test(test_types),
                                     cmocka_unit_test(test_csp), cmocka_unit_test(test_dir)};
  return cmocka_run_group_tests_name("unit_web_static", tests, NULL, NULL);
}
