#!/usr/bin/env bash
# The code's habits, checked (CI runs this after scripts/test.sh):
#  1. clang-format --dry-run -Werror over every C++ file of lib/, apps/, bench/
#     and tests/ (the repository's .clang-format);
#  2. the layering of lib/ (scripts/check-layers.py, docs/ARCHITECTURE.md);
#  3. clang-tidy (the repository's .clang-tidy, every warning an error) over
#     every source file of every layer of lib/src. Files that include
#     LibTorch take 10-45 s each (its headers), about 8 minutes for the
#     whole library on 2 cores; H5DCP_TIDY_LAYERS="base plan" limits it to
#     some layers while working.
# Uses ${H5DCP_BUILD_DIR:-build}/compile_commands.json (configured when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${H5DCP_BUILD_DIR:-build}

mapfile -t sources < <(git ls-files -co --exclude-standard 'lib/*.cpp' 'lib/*.hpp' 'apps/*.cpp' 'apps/*.hpp' \
  'bench/*.cpp' 'bench/*.hpp' 'tests/*.cpp' 'tests/*.hpp')
clang-format-14 --dry-run -Werror "${sources[@]}"
echo "lint.sh: clang-format: ${#sources[@]} files formatted as .clang-format says"

python3 scripts/check-layers.py

if [ ! -f "$build_dir/compile_commands.json" ]; then
  source scripts/venv-paths.sh
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH5DCP_PYTHON="$H5DCP_VENV/bin/python" >/dev/null
fi
read -r -a layers <<< "${H5DCP_TIDY_LAYERS:-base plan storage formats comm hdf5 torch training api interop manager}"
mapfile -t tidy_sources < <(for layer in "${layers[@]}"; do find lib/src/"$layer" -name '*.cpp' | sort; done)
# g++'s warning flags in the compile commands are unknown to clang: not an error.
printf '%s\n' "${tidy_sources[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy-14 -p "$build_dir" --quiet \
  --warnings-as-errors='*' --extra-arg=-Wno-unknown-warning-option
echo "lint.sh: clang-tidy: ${#tidy_sources[@]} files of the ${layers[*]} layers without warnings"
