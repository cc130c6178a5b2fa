/* shim_pq: the libpq functions the engine calls, opening libpq at the first
 * (lazylib.h says why). A function the store starts to use is added here. */
#include <libpq-fe.h>

#include "lazylib.h"

static struct lazylib pq = LAZYLIB("libpq.so.5", "libpq5");

LAZY_FN(pq, PGconn *, PQconnectdb, (const char *conninfo), (conninfo))
LAZY_FN(pq, PGconn *, PQconnectdbParams, (const char *const *keywords, const char *const *values, int expand_dbname),
        (keywords, values, expand_dbname))
LAZY_FN(pq, PQconninfoOption *, PQconninfoParse, (const char *conninfo, char **errmsg), (conninfo, errmsg))
LAZY_VOID(pq, PQconninfoFree, (PQconninfoOption *connOptions), (connOptions))
LAZY_VOID(pq, PQfinish, (PGconn *conn), (conn))
LAZY_VOID(pq, PQreset, (PGconn *conn), (conn))
LAZY_FN(pq, ConnStatusType, PQstatus, (const PGconn *conn), (conn))
LAZY_FN(pq, PGTransactionStatusType, PQtransactionStatus, (const PGconn *conn), (conn))
LAZY_FN(pq, char *, PQerrorMessage, (const PGconn *conn), (conn))
LAZY_FN(pq, int, PQsocket, (const PGconn *conn), (conn))
LAZY_FN(pq, int, PQbackendPID, (const PGconn *conn), (conn))
LAZY_FN(pq, char *, PQdb, (const PGconn *conn), (conn))
LAZY_FN(pq, char *, PQuser, (const PGconn *conn), (conn))
LAZY_FN(pq, char *, PQhost, (const PGconn *conn), (conn))
LAZY_FN(pq, char *, PQport, (const PGconn *conn), (conn))
LAZY_FN(pq, PQnoticeProcessor, PQsetNoticeProcessor, (PGconn *conn, PQnoticeProcessor proc, void *arg),
        (conn, proc, arg))
LAZY_FN(pq, int, PQsetnonblocking, (PGconn *conn, int arg), (conn, arg))
LAZY_FN(pq, int, PQflush, (PGconn *conn), (conn))
LAZY_FN(pq, int, PQconsumeInput, (PGconn *conn), (conn))
LAZY_FN(pq, int, PQisBusy, (PGconn *conn), (conn))
LAZY_FN(pq, PGnotify *, PQnotifies, (PGconn *conn), (conn))
LAZY_FN(pq, int, PQenterPipelineMode, (PGconn *conn), (conn))
LAZY_FN(pq, int, PQexitPipelineMode, (PGconn *conn), (conn))
LAZY_FN(pq, int, PQpipelineSync, (PGconn *conn), (conn))
LAZY_FN(pq, PGpipelineStatus, PQpipelineStatus, (const PGconn *conn), (conn))
LAZY_FN(pq, PGresult *, PQexec, (PGconn *conn, const char *query), (conn, query))
LAZY_FN(pq, PGresult *, PQprepare,
        (PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes),
        (conn, stmtName, query, nParams, paramTypes))
LAZY_FN(pq, PGresult *, PQexecPrepared,
        (PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths,
         const int *paramFormats, int resultFormat),
        (conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat))
LAZY_FN(pq, int, PQsendPrepare,
        (PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes),
        (conn, stmtName, query, nParams, paramTypes))
LAZY_FN(pq, int, PQsendQueryPrepared,
        (PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths,
         const int *paramFormats, int resultFormat),
        (conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat))
LAZY_FN(pq, PGresult *, PQgetResult, (PGconn *conn), (conn))
LAZY_FN(pq, ExecStatusType, PQresultStatus, (const PGresult *res), (res))
LAZY_FN(pq, char *, PQresultErrorField, (const PGresult *res, int fieldcode), (res, fieldcode))
LAZY_FN(pq, char *, PQcmdStatus, (PGresult *res), (res))
LAZY_FN(pq, char *, PQcmdTuples, (PGresult *res), (res))
LAZY_FN(pq, int, PQntuples, (const PGresult *res), (res))
LAZY_FN(pq, char *, PQgetvalue, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num))
LAZY_FN(pq, int, PQgetlength, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num))
LAZY_FN(pq, int, PQgetisnull, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num))
LAZY_VOID(pq, PQclear, (PGresult *res), (res))
LAZY_FN(pq, char *, PQescapeLiteral, (PGconn *conn, const char *str, size_t len), (conn, str, len))
LAZY_VOID(pq, PQfreemem, (void *ptr), (ptr))
