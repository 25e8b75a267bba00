#pragma once
// Options of save and load. Plain data, no torch, no HDF5.

namespace h5dcp {

/// How ranks write their shards into the shared datasets.
enum class IoMode {
  Collective,   ///< MPI-IO collective writes: two-phase I/O aggregates interleaved shards
  Independent,  ///< each rank writes its own hyperslabs on its own
};

struct SaveOptions {
  int coordinator = 0;  ///< rank that plans, publishes and names the checkpoint
  IoMode io_mode = IoMode::Collective;
};

struct LoadOptions {
  int coordinator = 0;  ///< rank that reads the metadata once and shares it
};

}  // namespace h5dcp
