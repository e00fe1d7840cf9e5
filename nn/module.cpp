#include <vkgrad/nn/module.hpp>

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
  StateDict mine = state_dict();
  std::map<std::string, const Tensor*> given;
  for (auto& [name, t] : values) given[name] = &t;
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
    given.erase(it);
  }
  if (strict && !given.empty()) throw Error("load_state_dict: the model has no tensor named " + given.begin()->first);
  // Checked everything first, so a bad dict changes nothing.
  std::map<std::string, const Tensor*> by_name;
  for (auto& [name, t] : values) by_name[name] = &t;
  std::vector<Tensor> changed;
  for (auto& [name, t] : mine) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    Tensor target = t;  // an alias: assigning to it changes the module's tensor
    Tensor value = *it->second;
    if (value.device() != t.device())  // through the host: there is no device-to-device copy op yet
      value = Tensor(value.bytes(), size_t(value.numel()), value.dtype(), value.shape(), t.device());
    {
      NoGrad no_grad;
      target.assign(value.cast(t.dtype()));
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
