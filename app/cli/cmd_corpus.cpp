// (being written) corpus build / stats
#include "commands.h"
namespace rag::cli {
int cmdCorpusBuild(Args&) { return fail(Status::unavailable("corpus build is not built yet")); }
int cmdCorpusStats(Args&) { return fail(Status::unavailable("corpus stats is not built yet")); }
}  // namespace rag::cli
