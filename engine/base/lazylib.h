/* lazylib: shared libraries opened when first called, not at start-up.
 *
 * libcurl, libpq and libmicrohttpd bring some thirty libraries with them
 * (TLS, Kerberos, LDAP, IDN...). Linked as usual, every `engine show` maps
 * and relocates them all before main: half of a command's start-up time,
 * for a command that only reads the database. The shims (shim_curl.c,
 * shim_pq.c, shim_mhd.c) define the libraries' functions the engine uses
 * under their own names; the first call opens the library and looks the
 * function up, so the code that calls them is written as against the
 * library itself. */
#ifndef ENGINE_LAZYLIB_H
#define ENGINE_LAZYLIB_H

#include <string.h>

struct lazylib {
  const char *soname;  /* "libcurl.so.4" */
  const char *package; /* the Debian package that has it, named when it is missing */
  int tried;           /* the rest is lazylib.c's, under its lock */
  void *handle;
  char error[256];
};
#define LAZYLIB(soname, package) {soname, package, 0, NULL, ""}

/* The address of NAME in LIB, opening LIB on the first call. A library or
 * function that is missing ends the process with a message naming it and
 * its package (as a missing library at start-up would have). */
void *lazylib_sym(struct lazylib *lib, const char *name);

/* LAZY_FN(lib, ret, name, (params), (args)): defines `ret name params` that
 * calls the library's own NAME, looked up once. LAZY_VOID for a void one. */
#define LAZY_LOOKUP(lib, name, params)                                      \
  static ret_##name (*name##_fn) params;                                    \
  ret_##name (*f) params = __atomic_load_n(&name##_fn, __ATOMIC_ACQUIRE);   \
  if (!f) {                                                                 \
    void *p = lazylib_sym(&(lib), #name);                                   \
    memcpy(&f, &p, sizeof f);                                               \
    __atomic_store_n(&name##_fn, f, __ATOMIC_RELEASE);                      \
  }
#define LAZY_FN(lib, ret, name, params, args) \
  typedef ret ret_##name;                     \
  ret name params {                           \
    LAZY_LOOKUP(lib, name, params)            \
    return f args;                            \
  }
#define LAZY_VOID(lib, name, params, args) \
  typedef void ret_##name;                 \
  void name params {                       \
    LAZY_LOOKUP(lib, name, params)         \
    f args;                                \
  }

#endif
