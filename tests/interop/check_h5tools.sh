#!/usr/bin/env bash
# Checks a checkpoint written by h5dcp-example with the HDF5 command-line
# tools alone: h5ls lists every tensor with its global shape, h5dump -H shows
# the types and h5dcp attributes, and h5dump prints bfloat16 values.
# usage: check_h5tools.sh FILE
set -euo pipefail
file=$1
fail=0
expect() {  # expect DESCRIPTION HAYSTACK NEEDLE (fixed string)
  if ! grep -qF -- "$3" <<<"$2"; then echo "FAIL: $1: no '$3'"; fail=1; fi
}
expect_line() {  # expect_line DESCRIPTION HAYSTACK REGEX (extended)
  if ! grep -qE -- "$3" <<<"$2"; then echo "FAIL: $1: no line matching '$3'"; fail=1; fi
}
listing=$(h5ls -r "$file")
# Every tensor with its global shape, and the nesting as groups.
expect_line "h5ls embedding" "$listing" '^/model/embedding\.weight +Dataset \{64, 16\}$'
expect_line "h5ls proj" "$listing" '^/model/proj\.weight +Dataset \{24, 20\}$'
expect_line "h5ls bias" "$listing" '^/model/proj\.bias +Dataset \{24\}$'
expect_line "h5ls scale" "$listing" '^/model/norm\.scale +Dataset \{16\}$'
expect_line "h5ls mask" "$listing" '^/model/mask +Dataset \{5, 7\}$'
expect_line "h5ls tokens" "$listing" '^/data/tokens +Dataset \{9, 3\}$'
expect_line "h5ls step" "$listing" '^/optim/step +Dataset \{SCALAR\}$'
expect_line "h5ls model group" "$listing" '^/model +Group$'
expect_line "h5ls list group" "$listing" '^/optim/param_groups +Group$'
expect_line "h5ls list element" "$listing" '^/optim/param_groups/0 +Group$'
expect_line "h5ls nested value" "$listing" '^/optim/param_groups/0/betas/1 +Dataset \{SCALAR\}$'
[ "$(grep -c Dataset <<<"$listing")" -eq 13 ] || { echo "FAIL: h5ls lists other than 13 datasets"; fail=1; }
header=$(h5dump -H "$file")
expect "format version" "$header" 'ATTRIBUTE "h5dcp.format_version"'
expect "float32 type" "$header" "H5T_IEEE_F32LE"
expect "bool enum" "$header" "H5T_ENUM"
expect "embedding shape" "$header" "DATASPACE  SIMPLE { ( 64, 16 ) / ( 64, 16 ) }"
# The first values of the bfloat16 tensor: ((i % 509) - 254) / 4.
values=$(h5dump -d /model/proj.weight -c "1,4" "$file")
expect "bfloat16 values" "$values" "(0,0): -63.5, -63.25, -63, -62.75"
strings=$(h5dump -d /optim/param_groups/0/name "$file")
expect "string value" "$strings" '(0): "adam"'
if [ "$fail" -ne 0 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
