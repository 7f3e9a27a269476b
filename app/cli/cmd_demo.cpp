// (being written) demo
#include "commands.h"
namespace rag::cli {
int cmdDemo(Args&) { return fail(Status::unavailable("demo is not built yet")); }
}  // namespace rag::cli
