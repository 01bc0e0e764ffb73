// Which implementation runs each op type of a frame (custom kernel, cuDNN, cuBLASLt, OpenBLAS ...), as
// the backend reports it per op, grouped by op type for the overlay.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"

namespace rtvd::gui {

// op type name (op_type_name) -> "cuBLASLt", or "cuDNN x12, custom igemm 128x64 x4" when ops of one type
// take different paths. ops: the frame ops the backend was prepared with.
std::map<std::string, std::string> implementations_by_type(const std::vector<Op>& ops, const Backend& backend);

}  // namespace rtvd::gui
