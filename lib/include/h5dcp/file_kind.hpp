#pragma once
// What kind of file a path holds, from its content (never its name): what
// `h5dcp convert` infers its direction from, and what readers check first to
// say clearly what a file is when it is not what they read.

#include <mpi.h>

#include <string>
#include <string_view>

namespace h5dcp {

enum class FileKind {
  TorchSave,        ///< a zip archive, as torch.save writes since PyTorch 1.6
  LegacyTorchSave,  ///< torch.save's legacy format (PyTorch < 1.6 or _use_new_zipfile_serialization=False)
  H5dcpCheckpoint,  ///< an HDF5 file with the h5dcp.format_version root attribute
  Hdf5,             ///< any other HDF5 file
  Other,            ///< none of these (empty, a plain pickle, text, ...)
  Safetensors,      ///< a Hugging Face safetensors file (a header size that fits the file, then '{')
};

/// The kind of the file at `path`. Not collective. Throws IoError when it is
/// missing, not a regular file, or cannot be read.
FileKind detect_file_kind(const std::string& path);

/// The kind of the file at `path`, agreed by every rank of `comm`. Collective
/// (every rank looks at the file itself: run it before collective work on the
/// file, e.g. under mpiexec). When some ranks cannot see or read the file, or
/// ranks see files of different kinds there, every rank throws the same
/// IoError ("'<path>' is not visible on ranks 1, 3: use a shared file
/// system"); when no rank can, each throws its own IoError as above.
FileKind detect_file_kind(const std::string& path, MPI_Comm comm);

/// "torch.save file", "legacy torch.save file", "h5dcp checkpoint", "HDF5
/// file (not an h5dcp checkpoint)", "file of an unknown format",
/// "safetensors file".
std::string_view describe(FileKind kind) noexcept;

}  // namespace h5dcp
