// The EngineBridge configuration of a tiny serving set-up (tests/fixtures/serving), shared by
// the widget tests that run a real engine: the history file goes next to the fixture.
#pragma once

#include <filesystem>

#include "../fixtures/serving/tiny_serving.h"
#include "bridge/engine_bridge.h"

inline ragwb::EngineConfig tinyBridgeConfig(const rag::testing::TinyServing& t, const char* policy = "hedra") {
  ragwb::EngineConfig c;
  c.corpus = t.corpus;
  c.modelDir = t.model;
  c.embedderDir = t.embedder;
  c.runStore = t.corpus.parent_path() / "runs.db";
  c.policy = *rag::parseServePolicy(policy);
  c.nprobe = 8;
  return c;
}
