// Progress reporting for long work (corpus build, training, indexing). The engine calls the
// callback; the CLI draws a bar on stderr, the GUI forwards it to a progress widget.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace rag {

// phase: what is being done ("parsing data.noun"); done/total in the phase's own units
// (total 0: unknown). Called from the working thread; keep it cheap.
using ProgressFn = std::function<void(std::string_view phase, uint64_t done, uint64_t total)>;

}  // namespace rag
