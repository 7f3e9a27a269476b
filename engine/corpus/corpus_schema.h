// The corpus database: passages, the knowledge graph (entities + typed relations) and the QA
// sets, in one SQLite file built by `ragraph corpus build`. The corpus is a build artifact:
// a file of another schema version is refused with the fix "rebuild it".
#pragma once

#include <array>

#include "storage/sqlite.h"

namespace rag::corpus {

inline constexpr int kCorpusSchemaVersion = 1;

// A corpus file also carries meta('format') = kCorpusFormat, so a database of another kind that
// happens to have the same user_version is not taken for a corpus.
inline constexpr const char* kCorpusFormat = "ragraph-corpus";

// Provenance columns on every row: `source` ('wordnet' | 'foldoc'), `source_file` (e.g.
// 'data.noun', 'foldoc.dict.dz') and `source_offset` (byte offset of the synset line or of the
// entry in the decompressed dictionary).
inline constexpr std::array<sql::Migration, 1> kCorpusMigrations = {{
    {1, R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE entities (
  id            INTEGER PRIMARY KEY,  -- dense from 1
  kind          TEXT NOT NULL,        -- 'synset' | 'lemma' | 'term' (FOLDOC)
  name          TEXT NOT NULL,        -- synset: first lemma; lemma / term: its text, spaces not underscores
  pos           TEXT,                 -- WordNet part of speech n|v|a|s|r; NULL for FOLDOC terms
  synset_offset INTEGER,              -- WordNet synset offset (kind synset); NULL otherwise
  source        TEXT NOT NULL,
  source_file   TEXT NOT NULL,
  source_offset INTEGER NOT NULL
);
CREATE TABLE passages (
  id            INTEGER PRIMARY KEY,  -- dense from 1
  entity_id     INTEGER NOT NULL REFERENCES entities(id),  -- the synset or term described
  chunk         INTEGER NOT NULL DEFAULT 0,                -- FOLDOC chunk order; 0 for WordNet
  title         TEXT NOT NULL,
  text          TEXT NOT NULL,
  n_tokens      INTEGER NOT NULL,     -- whitespace tokens of text
  source        TEXT NOT NULL,
  source_file   TEXT NOT NULL,
  source_offset INTEGER NOT NULL
);
CREATE TABLE relations (
  id            INTEGER PRIMARY KEY,
  src           INTEGER NOT NULL REFERENCES entities(id),
  type          TEXT NOT NULL,        -- 'hypernym', 'part_holonym', ..., 'lemma_of', 'xref'
  dst           INTEGER NOT NULL REFERENCES entities(id),
  source        TEXT NOT NULL,
  source_file   TEXT NOT NULL,
  source_offset INTEGER NOT NULL
);
CREATE TABLE qa (
  id            INTEGER PRIMARY KEY,
  split         TEXT NOT NULL,        -- 'train' | 'dev' | 'test'
  type          TEXT NOT NULL,        -- 'single_hop' | 'definition' | 'two_hop' | 'foldoc'
  relation      TEXT,                 -- the relation asked about ('hypernym', 'part_holonym', ...)
  topic_entity  INTEGER NOT NULL REFERENCES entities(id),  -- the entity the question is about
  question      TEXT NOT NULL,
  answers       TEXT NOT NULL,        -- JSON array of every acceptable answer string
  gold_passages TEXT NOT NULL,        -- JSON array of passage ids, in reasoning order
  kg_path       TEXT NOT NULL         -- JSON array alternating entity ids and relation types
);
-- The name each question uses for its topic (definitions: the first lemma), kept beside qa so
-- that the split's no-leak guarantee can be checked on names as well as on entity ids.
CREATE TABLE qa_topic_names (
  qa_id         INTEGER PRIMARY KEY REFERENCES qa(id),
  topic_name    TEXT NOT NULL
);
)sql"},
}};

// Indexes are created after the bulk insert (faster build); `corpus build` runs this at the end.
inline constexpr const char* kCorpusIndexes = R"sql(
CREATE INDEX entities_name ON entities(name);
CREATE INDEX entities_synset ON entities(synset_offset, pos);
CREATE INDEX passages_entity ON passages(entity_id);
CREATE INDEX relations_src ON relations(src, type);
CREATE INDEX relations_dst ON relations(dst, type);
CREATE INDEX qa_split_type ON qa(split, type);
CREATE INDEX qa_topic ON qa(topic_entity);
)sql";

}  // namespace rag::corpus
