/* lazylib: opens a shared library at its first use (lazylib.h says why). */
#include "lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* taken only until each shim has its function: the shims keep what they found */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static void *open_lib(struct lazylib *lib) {
  pthread_mutex_lock(&open_lock);
  if (!lib->tried) {
    lib->tried = 1;
    /* RTLD_LOCAL: the library's names stay out of the global scope, where
     * the shims' definitions of the same names are */
    lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
      const char *e = dlerror();
      snprintf(lib->error, sizeof lib->error, "%s", e ? e : "unknown error");
    }
  }
  void *h = lib->handle;
  pthread_mutex_unlock(&open_lock);
  return h;
}

void *lazylib_sym(struct lazylib *lib, const char *name) {
  void *h = open_lib(lib);
  if (!h) {
    fprintf(stderr, "engine: cannot load %s (Debian package %s): %s\n", lib->soname, lib->package, lib->error);
    exit(70);
  }
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "engine: %s has no %s (Debian package %s, too old?)\n", lib->soname, name, lib->package);
    exit(70);
  }
  return p;
}
