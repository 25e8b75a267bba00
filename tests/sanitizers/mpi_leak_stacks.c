/* Preloaded (LD_PRELOAD) into every process of scripts/sanitize.sh's test
 * run, so that LeakSanitizer can tell OpenMPI's own leaks from others with
 * ASan's fast unwinder. Not instrumented (Python and mpiexec load it too).
 *
 * A leak report names the libraries of the allocation's stack, and
 * tests/sanitizers/lsan.supp ignores leaks whose stack is inside OpenMPI.
 * The fast unwinder follows frame pointers, which OpenMPI and libc do not
 * keep, so a stack is malloc's caller and little more; two things would
 * hide that caller's library:
 *  - MPI_Finalize dlclose's OpenMPI's components (and libpmix with them):
 *    at exit, when LeakSanitizer reports, their addresses belong to no
 *    module. dlclose does nothing here: every library stays mapped until
 *    the process exits.
 *  - memory allocated by libc's asprintf on OpenMPI's behalf (e.g. the
 *    locality string of MPI_Init's orte_ess_base_proc_binding) has libc's
 *    vasprintf as its only frame. asprintf and vasprintf are implemented
 *    here, with frame pointers, so their caller is on the stack.
 * Neither changes what a program computes. The alternative, ASan's slow
 * unwinder (fast_unwind_on_malloc=0), makes the test suite about 3x slower.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int dlclose(void* handle) {
  (void)handle;
  return 0;
}

int vasprintf(char** out, const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0) return -1;
  char* text = malloc((size_t)n + 1);
  if (text == NULL) return -1;
  vsnprintf(text, (size_t)n + 1, format, args);
  *out = text;
  return n;
}

int __vasprintf_chk(char** out, int flag, const char* format, va_list args) {
  (void)flag;
  return vasprintf(out, format, args);
}

int asprintf(char** out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = vasprintf(out, format, args);
  va_end(args);
  return n;
}

int __asprintf_chk(char** out, int flag, const char* format, ...) {
  (void)flag;
  va_list args;
  va_start(args, format);
  const int n = vasprintf(out, format, args);
  va_end(args);
  return n;
}
