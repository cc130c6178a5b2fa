#include "fatal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int SIGNALS[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NSIGNALS (sizeof SIGNALS / sizeof *SIGNALS)

static char note_path[4096];
static char owner[64];
static volatile sig_atomic_t armed;
static const char *volatile current; /* workflow id whose code runs */
static const char *volatile detail;
static char reason[512]; /* set by a Lua panic or util.c's out of memory, just before they abort */
static struct sigaction previous[NSIGNALS];
static char altstack[64 * 1024]; /* a stack overflow leaves none to run the handler on */

static void put(int fd, const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static const char *signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "signal 11 (SIGSEGV)";
    case SIGBUS: return "signal 7 (SIGBUS)";
    case SIGILL: return "signal 4 (SIGILL)";
    case SIGFPE: return "signal 8 (SIGFPE)";
    case SIGABRT: return "signal 6 (SIGABRT)";
    default: return "a fatal signal";
  }
}

static void on_fatal(int sig, siginfo_t *info, void *uctx) {
  (void)uctx;
  const char *id = current;
  if (armed && id) {
    int fd = open(note_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      put(fd, owner);
      put(fd, "\n");
      put(fd, id);
      put(fd, "\n");
      put(fd, reason[0] ? reason : signal_name(sig));
      const char *d = detail;
      if (d) {
        put(fd, " in ");
        put(fd, d);
      }
      put(fd, "\n");
      close(fd);
    }
  }
  armed = 0;
  for (size_t i = 0; i < NSIGNALS; i++)
    if (SIGNALS[i] == sig) sigaction(sig, &previous[i], NULL);
  /* a fault re-runs the faulting instruction on return, now with the previous
   * disposition (default, or a sanitizer's report); a sent signal is re-sent */
  if (info->si_code <= 0) raise(sig);
}

void fatal_arm(const char *path, const char *who) {
  snprintf(note_path, sizeof note_path, "%s", path);
  snprintf(owner, sizeof owner, "%s", who);
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NSIGNALS; i++) sigaction(SIGNALS[i], &sa, &previous[i]);
  armed = 1;
}

void fatal_disarm(void) {
  if (!armed) return;
  armed = 0;
  for (size_t i = 0; i < NSIGNALS; i++) sigaction(SIGNALS[i], &previous[i], NULL);
}

const char *fatal_enter(const char *wf_id) {
  const char *was = current;
  current = wf_id;
  detail = NULL;
  return was;
}

void fatal_detail(const char *d) { detail = d; }

int fatal_lua_panic(lua_State *L) {
  const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "an error without a message";
  snprintf(reason, sizeof reason, "Lua panic: %s", m);
  fprintf(stderr, "engine: %s%s%s\n", reason, current ? " while running workflow " : "", current ? current : "");
  return 0; /* Lua aborts */
}

void fatal_reason(const char *what) { snprintf(reason, sizeof reason, "%s", what); }

static void read_line(FILE *f, char *out, size_t n) {
  if (!fgets(out, (int)n, f)) out[0] = 0;
  out[strcspn(out, "\n")] = 0;
}

int fatal_read_note(const char *path, char *own, size_t ownlen, char *wf_id, size_t idlen, char *what,
                    size_t whatlen) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  read_line(f, own, ownlen);
  read_line(f, wf_id, idlen);
  read_line(f, what, whatlen);
  fclose(f);
  return own[0] && wf_id[0];
}

void fatal_clear_note(const char *path) { unlink(path); }
