# Sourced by the scripts: where the project's Python environments live.
# Outside the checkout so that fresh clones (CI) reuse them; override with
# H5DCP_VENV / H5DCP_CUDA_VENV.
H5DCP_VENV=${H5DCP_VENV:-$HOME/.cache/h5dcp/venv-torch-2.13.0}
H5DCP_CUDA_VENV=${H5DCP_CUDA_VENV:-$HOME/.cache/h5dcp/venv-torch-2.14.1-cuda}
export H5DCP_VENV H5DCP_CUDA_VENV
