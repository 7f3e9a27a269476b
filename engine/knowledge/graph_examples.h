// Training examples for dependency fine-tuning (DepCache §3.3, `ragraph train lm --data graph`):
// GraphRAG prompts over the corpus's knowledge graph, in the graphrag workflow's format, whose
// completion is the question's answer.
//
// An example: a random single-hop or two-hop question of the split; the subgraph of its topic
// entity (L = 2, the serving fan-out) holding its gold path (the qa.kg_path) and up to K − 1 of
// its other paths drawn at random; `subgraphs − 1` distractor subgraphs of other questions'
// topic entities with up to K random paths each; the subgraphs shuffled, each one's paths in the
// retriever's canonical order. Under the ancestor mask the prompt is the dependency prompt
// serving builds (model/dep_prompt.h), under the causal mask the flat paths. The answer and EOS
// weigh 1, the prompt `promptLossWeight`. The paths are drawn at random rather than by the
// embedder's similarity, so an example needs no embedding (and the model learns to find the
// relevant path among irrelevant ones); when it does not fit `maxTokens`, K is halved.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "knowledge/kg_retriever.h"
#include "model/attention_mask.h"
#include "model/dep_prompt.h"
#include "model/tokenizer.h"
#include "model/trainer.h"

namespace rag::knowledge {

struct GraphExampleOptions {
  std::string split = "train";
  model::MaskKind mask = model::MaskKind::Ancestor;  // or Causal (flat paths)
  int32_t subgraphs = 5;
  int32_t paths = 30;        // K per subgraph
  int32_t fanout = 8;
  float promptLossWeight = 0.0f;
  // The prompt template (a graph variable, then the question); graphrag's by default.
  std::string promptTemplate = "Knowledge graph paths:\n{graph}Question: {question}\nAnswer:";
};

class GraphExampleSource final : public model::ExampleSource {
public:
  // Errors: the corpus's, a split without single-hop or two-hop questions, a mask other than
  // ancestor or causal.
  static Result<std::unique_ptr<GraphExampleSource>> open(const std::filesystem::path& corpus,
                                                          const model::Tokenizer& tokenizer,
                                                          const GraphExampleOptions& options);
  Result<model::TrainingExample> example(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) override;
  size_t items() const { return m_items.size(); }

private:
  struct Item {
    std::string question;
    std::string answer;
    std::vector<EntityId> entities;  // the gold path
    std::vector<std::string> relations;
  };
  GraphExampleSource(std::shared_ptr<const KnowledgeGraph> kg, model::Tokenizer tokenizer, GraphExampleOptions options,
                     std::vector<Item> items);

  std::shared_ptr<const KnowledgeGraph> m_kg;
  model::Tokenizer m_tokenizer;
  GraphExampleOptions m_options;
  std::vector<Item> m_items;
  model::ElementTokens m_elements;
  KgRetriever m_expander;  // its expand() only
};

}  // namespace rag::knowledge
