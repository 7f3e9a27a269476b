#include "core/heap.h"

#include <malloc.h>

#include <limits>

namespace rag {

void keepFreedMemoryInHeap() {
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

}  // namespace rag
