// (being written) trace make
#include "commands.h"
namespace rag::cli {
int cmdTraceMake(Args&) { return fail(Status::unavailable("trace make is not built yet")); }
}  // namespace rag::cli
