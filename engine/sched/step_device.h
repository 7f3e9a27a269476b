// Where a runner's forward pass runs, by name: "cpu" (this process's CPU kernels) or "cuda" /
// "cuda:N" (kernels/llama_step.h's GPU backend, in builds with the CUDA kernels); the same for
// the query encoder (kernels/bert_encoder.h). The serving
// engine (ServingParams::device) and the CLI's `--device` read it through here, so that a device
// that cannot be used is refused before any model loads.
#pragma once

#include <string>
#include <string_view>

#include "model/encoder_backend.h"
#include "model/step_backend.h"
#include "rag/status.h"

namespace rag {

// The runner's RunnerParams::backend for `device` (empty for "cpu"). InvalidArgument for a name
// that is none of those; Unavailable, naming the fix, for CUDA in a build without it or on a
// machine without that device. `gpu`: how a GPU backend runs (ignored for the CPU).
Result<model::StepBackendFactory> stepBackendFor(std::string_view device, const model::GpuStepOptions& gpu = {});

// The embedder's model::EncoderBackendFactory for `device` (empty for "cpu": its CPU kernels),
// with stepBackendFor's names and errors (--encoder-device in the messages).
Result<model::EncoderBackendFactory> encoderBackendFor(std::string_view device);

}  // namespace rag
