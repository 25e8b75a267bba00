#pragma once
// What kind of file a path holds, from its content (never its name): what
// `h5dcp convert` infers its direction from, and what readers check first to
// say clearly what a file is when it is not what they read.

#include <string>
#include <string_view>

namespace h5dcp {

enum class FileKind {
  TorchSave,        ///< a zip archive, as torch.save writes since PyTorch 1.6
  LegacyTorchSave,  ///< torch.save's legacy format (PyTorch < 1.6 or _use_new_zipfile_serialization=False)
  H5dcpCheckpoint,  ///< an HDF5 file with the h5dcp.format_version root attribute
  Hdf5,             ///< any other HDF5 file
  Other,            ///< none of these (empty, a plain pickle, text, ...)
};

/// The kind of the file at `path`. Not collective. Throws IoError when it is
/// missing, not a regular file, or cannot be read.
FileKind detect_file_kind(const std::string& path);

/// "torch.save file", "legacy torch.save file", "h5dcp checkpoint", "HDF5
/// file (not an h5dcp checkpoint)", "file of an unknown format".
std::string_view describe(FileKind kind) noexcept;

}  // namespace h5dcp
