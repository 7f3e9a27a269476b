// RAG_CLONES: compile a kernel once per x86-64 level (AVX-512, AVX2+FMA, baseline); the dynamic
// loader picks the best the CPU runs (an ifunc), so the binary stays portable without -march.
// Not under ThreadSanitizer: the loader runs an ifunc's resolver while relocating, before the TSan
// runtime is up, and GCC instruments the resolver too, so every binary holding a clone crashed
// at start (the tsan preset's first run); there the baseline build of each kernel serves.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define RAG_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RAG_CLONES
#endif
