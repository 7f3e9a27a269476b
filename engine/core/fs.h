// File-system helpers: atomic writes, whole-file reads, and where the product keeps its data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

#include "rag/status.h"

namespace rag {

// Reads a whole file. NotFound when it does not exist, IoError when it cannot be read.
Result<std::string> readFile(const std::filesystem::path& path);

// Writes `content` to "<path>.tmp-<pid>" and renames it over `path`, so readers see the old
// file or the new one, never half of one. Parent directories are created.
Status writeFileAtomic(const std::filesystem::path& path, std::string_view content);

// A temp path next to `target` for build-then-rename outputs, and the checks that make the
// rename safe: the directory exists (or can be made) and is writable.
struct StagedOutput {
  std::filesystem::path target;
  std::filesystem::path temp;
};
Result<StagedOutput> stageOutput(const std::filesystem::path& target);
// Renames temp over target (fsyncs nothing: SQLite already synced its file).
Status commitStagedOutput(const StagedOutput& staged);
// Removes the temp file and its SQLite side files (-journal, -wal, -shm) if present.
void discardStagedOutput(const StagedOutput& staged);

// A directory written in full beside its target, then swapped in, so that a reader (or a resumed
// training run) sees the old directory or the new one, never a mix of the two:
//
//   RAG_ASSIGN_OR_RETURN(fs::path staging, stageDirectory(out / "checkpoint"));
//   ... write every file into staging ...
//   RAG_RETURN_IF_ERROR(commitStagedDirectory(staging, out / "checkpoint"));
//
// stageDirectory makes an empty "<target>.staging" (removing one a killed run left behind).
// commitStagedDirectory exchanges it with <target> in one renameat2(RENAME_EXCHANGE) and removes
// the old contents; on a file system that cannot exchange, <target> is renamed to
// "<target>.old" first, and committedDirectory finds that one if a crash fell between the two
// renames. Nothing is fsynced: this guards against a killed process, not a power cut.
Result<std::filesystem::path> stageDirectory(const std::filesystem::path& target);
Status commitStagedDirectory(const std::filesystem::path& staging,
                             const std::filesystem::path& target);
// <target> when it exists, else "<target>.old" when that exists, else an empty path.
std::filesystem::path committedDirectory(const std::filesystem::path& target);

// FNV-1a (core/hash.h) over the bytes of `names` in `dir`, in order: what a model directory's
// fingerprint is made of. NotFound naming the first file missing.
Result<uint64_t> hashFiles(const std::filesystem::path& dir, std::initializer_list<const char*> names);

// The running executable (/proc/self/exe).
std::filesystem::path executablePath();

// Where the corpus, indexes and run history live when no flag says otherwise:
//  $RAGRAPH_DATA_DIR if set; else <build>/data when the executable runs from a build tree
//  (<build>/bin/ragraph with <build>/CMakeCache.txt); else $XDG_DATA_HOME/ragraph
//  (~/.local/share/ragraph).
std::filesystem::path defaultDataDir();

// defaultDataDir()/corpus.db, unless $RAGRAPH_CORPUS names another file.
std::filesystem::path defaultCorpusPath();

// The source tree's resources/ and datasets/ folders, found next to the build tree or the
// installed share/ragraph directory. Empty when not found.
std::filesystem::path findShippedDir(std::string_view name);

}  // namespace rag
