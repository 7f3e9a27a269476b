// A report on stderr when the process dies of a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT): which signal, the faulting address, and the crashing thread's frames as
// "module(function+offset) [address]", which `addr2line -f -C -e MODULE OFFSET` resolves (the
// binary that crashed, unstripped, or the same build). The process then dies of the same
// signal, so exit statuses and core dumps are what they would have been. For a crash on a
// machine where no debugger is at hand (a lent GPU machine runs the bundle, packaging/gpu-check).
// Plain C++ and POSIX.
#pragma once

namespace rag {

// Installs the report for the process (idempotent). `program` names it in the first line.
void installCrashReport(const char* program);

}  // namespace rag
