#pragma once
// Binary encodings of the plans and the metadata that ranks exchange.

#include "core/byte_codec.hpp"
#include "h5dcp/metadata.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {

Bytes encode(const SavePlan& plan);
SavePlan decode_save_plan(std::string_view bytes);

Bytes encode(const GlobalSavePlan& plan);
GlobalSavePlan decode_global_save_plan(std::string_view bytes);

Bytes encode(const Metadata& metadata);
Metadata decode_metadata(std::string_view bytes);

}  // namespace h5dcp::detail
