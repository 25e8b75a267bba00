#pragma once
// The physical limit under h5dcp's saves and loads, without MPI-IO or HDF5:
// plain POSIX calls on the same bytes at the same file offsets (h5dcp-bench
// times them beside h5dcp, across ranks).

#include <cstdint>
#include <string>
#include <vector>

namespace h5dcp_bench {

/// Bytes of one rank at one offset of the file.
struct FileRange {
  std::int64_t offset = 0;
  const void* data = nullptr;  // the bytes to write; unused by reads
  std::int64_t bytes = 0;
};

/// Writes `ranges` into `path` (created if missing; every rank opens it) with
/// the tricks h5dcp's writer uses: the ranges reserved first
/// (posix_fallocate), pwrite in pieces of `writeback_bytes`, each followed by
/// sync_file_range(SYNC_FILE_RANGE_WRITE) of the whole file (early
/// write-back; 0: none), then fsync. Not collective. Throws
/// std::runtime_error naming the call that failed.
/// `hash`: also takes the XXH3 checksum of every piece before writing it, on
/// the writing thread, as h5dcp's writer checksums its slabs; returns the
/// pieces' checksums combined (0 without `hash`), so that the hashing cannot
/// be left out.
std::uint64_t posix_write(const std::string& path, const std::vector<FileRange>& ranges, std::int64_t writeback_bytes,
                          bool hash = false);

/// Publishes `temporary` as `final_path` as h5dcp's commit does: rename, then
/// fsync of the directory. Not collective (one process calls it, once every
/// rank's data is durable). Throws std::runtime_error.
void publish(const std::string& temporary, const std::string& final_path);

/// The disk's own write speed (dd oflag=direct): `ranges` written with
/// O_DIRECT through an aligned bounce buffer of 16 MiB, then fsync. Offsets
/// and sizes must be multiples of 4096. Not collective. Throws
/// std::runtime_error.
void direct_write(const std::string& path, const std::vector<FileRange>& ranges);

/// What a direct-I/O writer would do with a file of the rank's own: `ranges`,
/// which follow each other in the file from an offset that is a multiple of
/// 4096 (a file per rank's), its space reserved, copied in order into
/// aligned bounce buffers of 16 MiB in pieces of 1 MiB, the XXH3 checksum of
/// each piece taken while it is in the cache (as h5dcp's writer checksums its
/// slabs), each full buffer written with O_DIRECT by a thread while the
/// other fills; the last one padded to 4096 and the file cut back to its
/// bytes, then fsync. No page cache: nothing is copied into
/// memory the kernel must find first. Not collective. Returns the pieces'
/// checksums combined. Throws std::runtime_error (also for ranges that do
/// not follow each other).
std::uint64_t direct_write_packed(const std::string& path, const std::vector<FileRange>& ranges);

/// Whether `path` holds every range's bytes at its offset (read back through
/// the page cache in pieces of 16 MiB). Not collective.
bool file_holds(const std::string& path, const std::vector<FileRange>& ranges);

/// Reads `ranges` of `path` (dd bs=16M: pread 16 MiB at a time into one
/// buffer, through the page cache). Returns the bytes read. Not collective.
/// Throws std::runtime_error, also on a short file.
std::int64_t posix_read(const std::string& path, const std::vector<FileRange>& ranges);

/// The disk's own read speed (dd iflag=direct bs=16M): `ranges` read with
/// O_DIRECT, 16 MiB at a time into one aligned buffer, past the page cache.
/// Offsets and sizes must be multiples of 4096. Returns the bytes read. Not
/// collective. Throws std::runtime_error, also on a short file.
std::int64_t direct_read(const std::string& path, const std::vector<FileRange>& ranges);

}  // namespace h5dcp_bench
