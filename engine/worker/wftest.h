/* wftest: `engine test FILE_test.lua...`, workflow tests for authors. Each
 * case of a test file runs workflows on a real engine (the workflow VM, the
 * store, dispatch, retries, replay checks) over a throwaway database, with
 * activities stubbed by the test and a virtual clock that skips timers. The
 * test API is lua/enginetest.lua; this file is its engine side. */
#ifndef ENGINE_WFTEST_H
#define ENGINE_WFTEST_H

/* argv holds the arguments after "test". Returns the exit code: 0 when every
 * case passes, 1 when one fails, 2 for a usage error or a test file that does
 * not load. */
int wftest_main(int argc, char **argv);

#endif
