// A knowledge retrieval's internal result (KgResult, ids into the graph) as the public record a
// request's knowledge stage carries (rag/knowledge.h's KnowledgeUse: names resolved, every
// scored path with its score and whether it was kept).
#pragma once

#include <memory>
#include <string_view>

#include "knowledge/kg_retriever.h"
#include "knowledge/knowledge_graph.h"
#include "rag/knowledge.h"

namespace rag::knowledge {

KgEntity publicEntity(const KnowledgeGraph& kg, EntityId id);
std::shared_ptr<const KnowledgeUse> knowledgeUse(const KnowledgeGraph& kg, std::string_view query, const KgResult& r);

}  // namespace rag::knowledge
