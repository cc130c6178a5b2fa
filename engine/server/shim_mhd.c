/* shim_mhd: the libmicrohttpd functions the API server calls, opening the
 * library when `engine serve --listen` starts it (lazylib.h says why). A
 * function the server starts to use is added here. */
#include <microhttpd.h>
#include <stdarg.h>
#include <stdint.h>

#include "lazylib.h"

static struct lazylib mhd = LAZYLIB("libmicrohttpd.so.12", "libmicrohttpd12");

LAZY_FN(mhd, struct MHD_Daemon *, MHD_start_daemon_va,
        (unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls, MHD_AccessHandlerCallback dh,
         void *dh_cls, va_list ap),
        (flags, port, apc, apc_cls, dh, dh_cls, ap))
LAZY_VOID(mhd, MHD_stop_daemon, (struct MHD_Daemon *d), (d))
LAZY_FN(mhd, MHD_socket, MHD_quiesce_daemon, (struct MHD_Daemon *d), (d))
LAZY_FN(mhd, enum MHD_Result, MHD_run, (struct MHD_Daemon *d), (d))
LAZY_FN(mhd, enum MHD_Result, MHD_get_timeout, (struct MHD_Daemon *d, MHD_UNSIGNED_LONG_LONG *timeout), (d, timeout))
LAZY_FN(mhd, struct MHD_Response *, MHD_create_response_from_buffer,
        (size_t size, void *buffer, enum MHD_ResponseMemoryMode mode), (size, buffer, mode))
LAZY_FN(mhd, struct MHD_Response *, MHD_create_response_from_callback,
        (uint64_t size, size_t block_size, MHD_ContentReaderCallback crc, void *crc_cls,
         MHD_ContentReaderFreeCallback crfc),
        (size, block_size, crc, crc_cls, crfc))
LAZY_FN(mhd, enum MHD_Result, MHD_add_response_header,
        (struct MHD_Response *response, const char *header, const char *content), (response, header, content))
LAZY_VOID(mhd, MHD_destroy_response, (struct MHD_Response *response), (response))
LAZY_FN(mhd, enum MHD_Result, MHD_queue_response,
        (struct MHD_Connection *c, unsigned int status_code, struct MHD_Response *response),
        (c, status_code, response))
LAZY_FN(mhd, int, MHD_get_connection_values,
        (struct MHD_Connection *c, enum MHD_ValueKind kind, MHD_KeyValueIterator iterator, void *iterator_cls),
        (c, kind, iterator, iterator_cls))
LAZY_FN(mhd, const char *, MHD_lookup_connection_value,
        (struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key), (c, kind, key))
LAZY_VOID(mhd, MHD_suspend_connection, (struct MHD_Connection *c), (c))
LAZY_VOID(mhd, MHD_resume_connection, (struct MHD_Connection *c), (c))
LAZY_FN(mhd, const char *, MHD_get_reason_phrase_for, (unsigned int code), (code))

/* The variadic ones. MHD_start_daemon's options go on as its va_list;
 * the info queries the server makes take nothing after the type; the one
 * connection option there is (MHD_CONNECTION_OPTION_TIMEOUT) takes an
 * unsigned int. */
struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls,
                                    MHD_AccessHandlerCallback dh, void *dh_cls, ...) {
  va_list ap;
  va_start(ap, dh_cls);
  struct MHD_Daemon *d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
  va_end(ap);
  return d;
}

typedef const union MHD_ConnectionInfo *ret_MHD_get_connection_info;
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c,
                                                        enum MHD_ConnectionInfoType info_type, ...) {
  LAZY_LOOKUP(mhd, MHD_get_connection_info, (struct MHD_Connection *, enum MHD_ConnectionInfoType, ...))
  return f(c, info_type);
}

typedef const union MHD_DaemonInfo *ret_MHD_get_daemon_info;
const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *d, enum MHD_DaemonInfoType info_type, ...) {
  LAZY_LOOKUP(mhd, MHD_get_daemon_info, (struct MHD_Daemon *, enum MHD_DaemonInfoType, ...))
  return f(d, info_type);
}

typedef enum MHD_Result ret_MHD_set_connection_option;
enum MHD_Result MHD_set_connection_option(struct MHD_Connection *c, enum MHD_CONNECTION_OPTION option, ...) {
  LAZY_LOOKUP(mhd, MHD_set_connection_option, (struct MHD_Connection *, enum MHD_CONNECTION_OPTION, ...))
  va_list ap;
  va_start(ap, option);
  enum MHD_Result rc = f(c, option, va_arg(ap, unsigned int));
  va_end(ap);
  return rc;
}
