#!/bin/sh
# hide_directory.sh DIR CMD ARGS...: runs CMD with an empty tmpfs over DIR,
# so DIR's files are invisible to it (like a node-local disk another node
# wrote to). Meant to run under `unshare -m` (a mount namespace of its own).
set -e
dir=$1
shift
mount -t tmpfs none "$dir"
exec "$@"
