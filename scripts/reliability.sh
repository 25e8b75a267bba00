#!/usr/bin/env bash
# The reliability figures in one command; writes docs/RELIABILITY.md.
# Runs tests/reliability/reliability.py over fault_trial: the fault matrix
# (every phase x failing rank x throw/kill/stall, at 2 and 4 ranks), kill -9
# at random moments of a save loop, random byte flips, the node-local tier's
# node-loss matrix (every loss pattern of 3 faked nodes, 1 and 2 replicas), and takes the fuzzing
# figures from build-san/fuzz-stats.json when scripts/sanitize.sh has run, and
# runs tests/hostile/run_hostile.py (damaged and malicious files) first.
# The report records the SHA-256 of the sources it measured (the library's
# save, load and publish paths, the trials: tests/reliability/report_current.py),
# hashed as the run starts; CTest's docs.reliability_current fails once they
# change, until this script runs again (about 35 minutes).
# Knobs (environment): KILLS (20), FLIPS (400), WORKDIR (/tmp/h5dcp-reliability).
# To refresh only the fuzzing figures of an earlier run: reliability.py
#   --report-from build/reliability.json --hostile-json build/hostile.json
#   --fuzz-stats build-san/fuzz-stats.json --report docs/RELIABILITY.md (without
#   --hostile-json the hostile-input section is left out). The report keeps
#   the run's settings and sources hash from the JSON: the figures are the run's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build=${H5DCP_BUILD_DIR:-build}
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
source scripts/venv-paths.sh
# Hostile inputs first: every subcommand on damaged and malicious files, from
# every tests/hostile/make_hostile_*.py (as tests/hostile/CMakeLists.txt runs them).
generators=()
for g in tests/hostile/make_hostile_*.py; do generators+=(--generator "$g"); done
"$H5DCP_VENV/bin/python" tests/hostile/run_hostile.py --h5dcp "$build/apps/h5dcp" --python "$H5DCP_VENV/bin/python" \
  "${generators[@]}" \
  --workdir "${WORKDIR:-/tmp/h5dcp-reliability}-hostile" --json "$build/hostile.json" >/dev/null
"$H5DCP_VENV/bin/python" tests/reliability/reliability.py --hostile-json "$build/hostile.json" --trial "$build/tests/h5dcp_fault_trial" --mpiexec mpiexec \
  --workdir "${WORKDIR:-/tmp/h5dcp-reliability}" --kills "${KILLS:-20}" --flips "${FLIPS:-400}" \
  --json "$build/reliability.json" --report docs/RELIABILITY.md --fuzz-stats build-san/fuzz-stats.json
echo "wrote docs/RELIABILITY.md"
