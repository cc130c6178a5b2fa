/* shim_curl: the libcurl functions the engine calls, opening libcurl at the
 * first (lazylib.h says why). A function the engine starts to use is added
 * here. */
#define CURL_DISABLE_TYPECHECK /* its macros would rename the definitions below */
#include <curl/curl.h>
#include <stdarg.h>

#include "lazylib.h"

static struct lazylib curl = LAZYLIB("libcurl.so.4", "libcurl4");

LAZY_FN(curl, CURLcode, curl_global_init, (long flags), (flags))
LAZY_VOID(curl, curl_global_cleanup, (void), ())
LAZY_FN(curl, CURL *, curl_easy_init, (void), ())
LAZY_FN(curl, CURLcode, curl_easy_perform, (CURL *c), (c))
LAZY_VOID(curl, curl_easy_cleanup, (CURL *c), (c))
LAZY_FN(curl, CURLcode, curl_easy_pause, (CURL *c, int bitmask), (c, bitmask))
LAZY_FN(curl, const char *, curl_easy_strerror, (CURLcode code), (code))
LAZY_VOID(curl, curl_free, (void *p), (p))
LAZY_FN(curl, struct curl_slist *, curl_slist_append, (struct curl_slist *list, const char *data), (list, data))
LAZY_VOID(curl, curl_slist_free_all, (struct curl_slist *list), (list))
LAZY_FN(curl, CURLM *, curl_multi_init, (void), ())
LAZY_FN(curl, CURLMcode, curl_multi_add_handle, (CURLM *m, CURL *c), (m, c))
LAZY_FN(curl, CURLMcode, curl_multi_remove_handle, (CURLM *m, CURL *c), (m, c))
LAZY_FN(curl, CURLMcode, curl_multi_cleanup, (CURLM *m), (m))
LAZY_FN(curl, CURLMcode, curl_multi_perform, (CURLM *m, int *running), (m, running))
LAZY_FN(curl, CURLMcode, curl_multi_poll,
        (CURLM *m, struct curl_waitfd extra_fds[], unsigned int extra_nfds, int timeout_ms, int *ret),
        (m, extra_fds, extra_nfds, timeout_ms, ret))
LAZY_FN(curl, CURLMsg *, curl_multi_info_read, (CURLM *m, int *msgs_in_queue), (m, msgs_in_queue))
LAZY_FN(curl, CURLMcode, curl_multi_socket_action, (CURLM *m, curl_socket_t s, int ev_bitmask, int *running),
        (m, s, ev_bitmask, running))
LAZY_FN(curl, CURLMcode, curl_multi_assign, (CURLM *m, curl_socket_t sockfd, void *sockp), (m, sockfd, sockp))
LAZY_FN(curl, CURLU *, curl_url, (void), ())
LAZY_VOID(curl, curl_url_cleanup, (CURLU *u), (u))
LAZY_FN(curl, CURLUcode, curl_url_get, (CURLU *u, CURLUPart what, char **part, unsigned int flags),
        (u, what, part, flags))
LAZY_FN(curl, CURLUcode, curl_url_set, (CURLU *u, CURLUPart what, const char *part, unsigned int flags),
        (u, what, part, flags))

/* The variadic ones take one argument after the option, whose type the
 * option's number says (curl.h's CURLOPTTYPE_* ranges): a long, a
 * curl_off_t, or a pointer (object or function, one size on the platforms
 * the engine builds for). It is read as that type and passed on as it. */
#define FORWARD_BY_TYPE(f, handle, option, ap)                                               \
  ((option) < CURLOPTTYPE_OBJECTPOINT ? f(handle, option, va_arg(ap, long))                  \
   : (option) >= CURLOPTTYPE_OFF_T && (option) < CURLOPTTYPE_BLOB                            \
       ? f(handle, option, va_arg(ap, curl_off_t))                                           \
       : f(handle, option, va_arg(ap, void *)))

/* SETOPT(name, handle type, option type, result type): one of them */
#define SETOPT(name, handle_t, option_t, ret_t)              \
  typedef ret_t ret_##name;                                  \
  ret_t name(handle_t *h, option_t option, ...) {            \
    LAZY_LOOKUP(curl, name, (handle_t *, option_t, ...))     \
    va_list ap;                                              \
    va_start(ap, option);                                    \
    ret_t rc = FORWARD_BY_TYPE(f, h, option, ap);            \
    va_end(ap);                                              \
    return rc;                                               \
  }
SETOPT(curl_easy_setopt, CURL, CURLoption, CURLcode)
SETOPT(curl_multi_setopt, CURLM, CURLMoption, CURLMcode)

/* every CURLINFO_* takes a pointer to where the answer goes */
typedef CURLcode ret_curl_easy_getinfo;
CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...) {
  LAZY_LOOKUP(curl, curl_easy_getinfo, (CURL *, CURLINFO, ...))
  va_list ap;
  va_start(ap, info);
  CURLcode rc = f(c, info, va_arg(ap, void *));
  va_end(ap);
  return rc;
}
