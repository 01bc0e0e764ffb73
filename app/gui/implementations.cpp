#include "app/gui/implementations.h"

#include "base/error.h"

namespace rtvd::gui {

std::map<std::string, std::string> implementations_by_type(const std::vector<Op>& ops, const Backend& backend) {
  std::map<std::string, std::map<std::string, int>> counts;  // type -> implementation -> ops
  for (size_t i = 0; i < ops.size(); ++i) ++counts[op_type_name(ops[i].body)][backend.frame_op_impl(i)];
  std::map<std::string, std::string> out;
  for (const auto& [type, impls] : counts) {
    std::string& text = out[type];
    for (const auto& [impl, n] : impls) {
      text += text.empty() ? "" : ", ";
      text += impls.size() == 1 ? impl : cat(impl, " x", n);
    }
  }
  return out;
}

}  // namespace rtvd::gui
