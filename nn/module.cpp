#include <vkgrad/nn/module.hpp>

#include <algorithm>
#include <map>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : state_dict())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

void Module::load_state_dict(const StateDict& values, bool strict) {
  std::map<std::string, const Tensor*> given;
  for (auto& [name, t] : values) given[name] = &t;
  StateDict mine = state_dict();
  // Everything is checked first, so a bad dict changes nothing.
  std::vector<std::pair<Tensor, Tensor>> updates;  // (the module's tensor, its new value)
  size_t matched = 0;
  for (auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      if (strict) throw Error("load_state_dict: no value given for " + name + " " + shape_str(t.shape()));
      continue;
    }
    const Tensor& v = *it->second;
    if (v.shape() != t.shape())
      throw Error("load_state_dict: " + name + " has shape " + shape_str(t.shape()) + ", the value has " +
                  shape_str(v.shape()));
    updates.emplace_back(t, v);
    ++matched;
  }
  if (strict && matched != given.size())
    for (auto& [name, _] : given)
      if (std::none_of(mine.begin(), mine.end(), [&](const auto& m) { return m.first == name; }))
        throw Error("load_state_dict: the model has no tensor named " + name);
  std::vector<Tensor> changed;
  for (auto& [target, value] : updates) {
    Tensor v = value;
    if (v.device() != target.device())  // through the host: there is no device-to-device copy op yet
      v = Tensor(v.bytes(), size_t(v.numel()), v.dtype(), v.shape(), target.device());
    {
      NoGrad no_grad;
      target.assign(v.cast(target.dtype()));  // an alias: this changes the module's tensor
    }
    changed.push_back(target);
  }
  realize_all(changed);
}

StateDict named(std::initializer_list<std::pair<std::string, const Module*>> children) {
  StateDict out;
  for (auto& [prefix, module] : children)
    for (auto& [name, t] : module->state_dict()) out.emplace_back(prefix + "." + name, t);
  return out;
}

void realize_all(std::vector<Tensor> tensors) {
  std::vector<Tensor*> ptrs;
  for (Tensor& t : tensors) ptrs.push_back(&t);
  realize(std::span<Tensor* const>(ptrs));
}

}  // namespace vkg::nn
