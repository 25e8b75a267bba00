#include "storage/directory_publish.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "storage/durable_file.hpp"

namespace h5dcp::detail {
namespace {

// Removes the files of the directory `dir` for which `ours` holds, then
// `dir` itself when nothing else is left in it.
void remove_own_files(const std::string& dir, const OwnFileName& ours) noexcept {
  try {
    if (DIR* d = ::opendir(dir.c_str())) {
      std::vector<std::string> names;
      while (const auto* entry = ::readdir(d)) {
        const std::string name = entry->d_name;
        if (name != "." && name != ".." && ours(name)) names.push_back(name);
      }
      ::closedir(d);
      for (const auto& name : names) {
        std::string path = dir;
        path += '/';
        path += name;
        remove_quietly(path);
      }
    }
    ::rmdir(dir.c_str());
  } catch (...) {
  }
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
