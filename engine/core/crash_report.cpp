#include "core/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rag {

namespace {

const char* g_program = "ragraph";
char g_altStack[64 * 1024];  // the crashing thread may have overflowed its own stack

void writeAll(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void onFatal(int sig, siginfo_t* info, void*) {
  // snprintf into a stack buffer: not async-signal-safe in theory, but glibc's does not allocate
  // for these conversions, and the process is dying either way.
  char line[256];
  const int n = std::snprintf(line, sizeof line, "\n%s: fatal signal %d (%s) at address %p, thread %ld; backtrace:\n",
                              g_program, sig, strsignal(sig), info ? info->si_addr : nullptr,
                              static_cast<long>(::gettid()));
  if (n > 0) writeAll(line, static_cast<size_t>(std::min<int>(n, static_cast<int>(sizeof line) - 1)));
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, 2);
  static const char kHint[] = "(resolve a frame with addr2line -f -C -e MODULE OFFSET)\n";
  writeAll(kHint, sizeof kHint - 1);
  ::raise(sig);  // SA_RESETHAND: the default action now, so the process dies of `sig`
}

}  // namespace

void installCrashReport(const char* program) {
  if (program) g_program = program;
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  stack_t ss{};
  ss.ss_sp = g_altStack;
  ss.ss_size = sizeof g_altStack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = onFatal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace rag
