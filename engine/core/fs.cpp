#include "core/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/hash.h"

namespace fs = std::filesystem;

namespace rag {

Result<std::string> readFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::notFound("file " + path.string() + " does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::ioError("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::ioError("error while reading " + path.string());
  return ss.str();
}

Result<uint64_t> hashFiles(const fs::path& dir, std::initializer_list<const char*> names) {
  uint64_t h = kFnvOffset;
  for (const char* name : names) {
    RAG_ASSIGN_OR_RETURN(std::string bytes, readFile(dir / name));
    h = fnv1a(bytes, h);
  }
  return h;
}

Result<StagedOutput> stageOutput(const fs::path& target) {
  std::error_code ec;
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(dir, ec);
  if (ec)
    return Status::ioError("cannot create directory " + dir.string() + " for " + target.string() +
                           ": " + ec.message() + "; choose a writable location");
  if (::access(dir.c_str(), W_OK) != 0)
    return Status::ioError("directory " + dir.string() + " is not writable (" +
                           std::strerror(errno) + "); choose a writable output path");
  if (fs::is_directory(target, ec))
    return Status::invalidArgument("output " + target.string() +
                                   " is a directory; give a file name");
  StagedOutput s;
  s.target = target;
  s.temp = target;
  s.temp += ".tmp-" + std::to_string(::getpid());
  discardStagedOutput(s);  // a stale temp from a killed run
  return s;
}

Status commitStagedOutput(const StagedOutput& staged) {
  std::error_code ec;
  fs::rename(staged.temp, staged.target, ec);
  if (ec)
    return Status::ioError("cannot move " + staged.temp.string() + " to " + staged.target.string() +
                           ": " + ec.message());
  return Status::ok();
}

void discardStagedOutput(const StagedOutput& staged) {
  std::error_code ec;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
    fs::path p = staged.temp;
    p += suffix;
    fs::remove(p, ec);
  }
}

Status writeFileAtomic(const fs::path& path, std::string_view content) {
  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(path));
  {
    std::ofstream out(staged.temp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::ioError("cannot write " + staged.temp.string() + ": " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      discardStagedOutput(staged);
      return Status::ioError("write to " + staged.temp.string() + " failed (disk full?)");
    }
  }
  Status s = commitStagedOutput(staged);
  if (!s) discardStagedOutput(staged);
  return s;
}

namespace {

fs::path withSuffix(const fs::path& p, std::string_view suffix) {
  fs::path out = p;
  out += suffix;
  return out;
}

}  // namespace

Result<fs::path> stageDirectory(const fs::path& target) {
  const fs::path staging = withSuffix(target, ".staging");
  std::error_code ec;
  fs::remove_all(staging, ec);  // what a killed run left behind
  if (ec)
    return Status::ioError("cannot remove the stale " + staging.string() + ": " + ec.message());
  fs::create_directories(staging, ec);
  if (ec)
    return Status::ioError("cannot create " + staging.string() + ": " + ec.message() +
                           "; choose a writable output directory");
  return staging;
}

Status commitStagedDirectory(const fs::path& staging, const fs::path& target) {
  std::error_code ec;
  const fs::path old = withSuffix(target, ".old");
  if (fs::exists(target, ec)) {
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(staging, ec);  // now the previous contents; a leftover is harmless
      fs::remove_all(old, ec);
      return Status::ok();
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      return Status::ioError("cannot swap " + staging.string() + " into " + target.string() +
                             ": " + std::strerror(errno));
    // No exchange on this file system: move the old one aside first.
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    if (ec)
      return Status::ioError("cannot move " + target.string() + " aside: " + ec.message());
  }
  fs::rename(staging, target, ec);
  if (ec)
    return Status::ioError("cannot move " + staging.string() + " to " + target.string() + ": " +
                           ec.message());
  fs::remove_all(old, ec);
  return Status::ok();
}

fs::path committedDirectory(const fs::path& target) {
  std::error_code ec;
  if (fs::is_directory(target, ec)) return target;
  const fs::path old = withSuffix(target, ".old");
  if (fs::is_directory(old, ec)) return old;
  return {};
}

fs::path executablePath() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

static fs::path buildTreeOfExecutable() {
  fs::path exe = executablePath();
  if (exe.empty()) return {};
  fs::path build = exe.parent_path().parent_path();  // <build>/bin/<exe>
  std::error_code ec;
  if (fs::exists(build / "CMakeCache.txt", ec)) return build;
  return {};
}

fs::path defaultDataDir() {
  if (const char* env = std::getenv("RAGRAPH_DATA_DIR"); env && *env) return env;
  if (fs::path build = buildTreeOfExecutable(); !build.empty()) return build / "data";
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return fs::path(xdg) / "ragraph";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".local/share/ragraph";
}

fs::path defaultCorpusPath() {
  if (const char* env = std::getenv("RAGRAPH_CORPUS"); env && *env) return env;
  return defaultDataDir() / "corpus.db";
}

fs::path findShippedDir(std::string_view name) {
  std::error_code ec;
  if (fs::path build = buildTreeOfExecutable(); !build.empty()) {
    // The build tree records its source tree.
    std::ifstream cache(build / "CMakeCache.txt");
    std::string line;
    const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    while (std::getline(cache, line)) {
      if (line.rfind(key, 0) == 0) {
        fs::path p = fs::path(line.substr(key.size())) / name;
        if (fs::is_directory(p, ec)) return p;
      }
    }
  }
  fs::path exe = executablePath();
  if (!exe.empty()) {
    fs::path p = exe.parent_path().parent_path() / "share/ragraph" / name;
    if (fs::is_directory(p, ec)) return p;
  }
  return {};
}

}  // namespace rag
