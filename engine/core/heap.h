// Process-wide allocator setting for tensor work.
#pragma once

namespace rag {

// Makes glibc malloc keep freed memory in the process heap: no mmap for large blocks, no
// trimming. libtorch's CPU allocator is malloc, so without this every step's large tensors
// (logits, activations, KV gathers) are mmapped and unmapped anew and the page faults cost
// several times the arithmetic. The process keeps its peak footprint afterwards. Idempotent;
// call before the first tensor work (the trainer and ModelRunner::create do).
void keepFreedMemoryInHeap();

}  // namespace rag
