#!/usr/bin/env bash
# Checks a checkpoint written by h5dcp-example (4 ranks) with the HDF5
# command-line tools alone: h5ls lists the sharded tensors with their global
# shape and the packs of the small ones (format 1.2), h5dump shows the packs'
# index, the types and h5dcp attributes (strings fixed-length: no global
# heap, docs/FORMAT.md), and prints bfloat16 values.
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
# The sharded tensors as datasets with their global shape, and the nesting as groups.
expect_line "h5ls embedding" "$listing" '^/model/embedding\.weight +Dataset \{64, 16\}$'
expect_line "h5ls proj" "$listing" '^/model/proj\.weight +Dataset \{24, 20\}$'
expect_line "h5ls model group" "$listing" '^/model +Group$'
expect_line "h5ls group of packed tensors only" "$listing" '^/data +Group$'
expect_line "h5ls list group" "$listing" '^/optim/param_groups +Group$'
expect_line "h5ls list element" "$listing" '^/optim/param_groups/0 +Group$'
expect_line "h5ls nested value" "$listing" '^/optim/param_groups/0/betas/1 +Dataset \{SCALAR\}$'
# The five small tensors saved whole (format 1.2): a pack per dtype and the index.
expect_line "h5ls packs" "$listing" '^/%packs +Group$'
expect_line "h5ls index" "$listing" '^/%packs/index +Dataset \{5\}$'
expect_line "h5ls float16 pack (proj.bias)" "$listing" '^/%packs/float16 +Dataset \{24\}$'
expect_line "h5ls float64 pack (norm.scale)" "$listing" '^/%packs/float64 +Dataset \{16\}$'
expect_line "h5ls bool pack (mask)" "$listing" '^/%packs/bool +Dataset \{35\}$'
expect_line "h5ls int32 pack (tokens)" "$listing" '^/%packs/int32 +Dataset \{27\}$'
expect_line "h5ls int64 pack (step)" "$listing" '^/%packs/int64 +Dataset \{1\}$'
[ "$(grep -c Dataset <<<"$listing")" -eq 14 ] || { echo "FAIL: h5ls lists other than 14 datasets"; fail=1; }
# The index's rows name each packed tensor with its shape.
index=$(h5dump -d /%packs/index "$file")
expect "index fqn column" "$index" '"model/proj.bias'
expect "index dtype column" "$index" '"float16'
expect "index shape column" "$index" '[ 24, 0, 0, 0, 0, 0, 0, 0 ]'
expect "index 0-d tensor" "$index" '"optim/step'
header=$(h5dump -H "$file")
expect "format version" "$header" 'ATTRIBUTE "h5dcp.format_version"'
expect "float32 type" "$header" "H5T_IEEE_F32LE"
expect "bool enum" "$header" "H5T_ENUM"
expect "embedding shape" "$header" "DATASPACE  SIMPLE { ( 64, 16 ) / ( 64, 16 ) }"
expect "fixed-length strings" "$header" "STRPAD H5T_STR_NULLPAD"
if grep -qF "H5T_VARIABLE" <<<"$header"; then echo "FAIL: a variable-length string"; fail=1; fi
# The first values of the bfloat16 tensor: ((i % 509) - 254) / 4.
values=$(h5dump -d /model/proj.weight -c "1,4" "$file")
expect "bfloat16 values" "$values" "(0,0): -63.5, -63.25, -63, -62.75"
strings=$(h5dump -d /optim/param_groups/0/name "$file")
expect "string value" "$strings" '(0): "adam"'
if [ "$fail" -ne 0 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
