#include "storage/directory_publish.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "storage/checkpoint_directory.hpp"
#include "storage/durable_file.hpp"

namespace h5dcp::detail {
namespace {

// Removes the files of the directory `dir` for which `ours` holds, then
// `dir` itself when nothing else is left in it.
void remove_own_files(const std::string& dir, const OwnFileName& ours) noexcept {
  try {
    for (const auto& name : list_names(dir))
      if (ours(name)) remove_quietly(std::string(dir).append("/").append(name));
  } catch (...) {
  }
  ::rmdir(dir.c_str());
}

}  // namespace

void publish_directory(const std::string& from, const std::string& dst, const OwnFileName& ours) {
  struct stat info {};
  if (::stat(dst.c_str(), &info) == 0) {
    if (exchange_paths(from, dst)) {
      remove_own_files(from, ours);
      return;
    }
    retire_directory(dst, ours);
  }
  publish_by_rename(from, dst);
}

void retire_directory(const std::string& dst, const OwnFileName& ours) noexcept {
  try {
    const auto aside = temporary_sibling(dst);
    if (::rename(dst.c_str(), aside.c_str()) != 0) return;
    remove_own_files(aside, ours);
  } catch (...) {
  }
}

}  // namespace h5dcp::detail
