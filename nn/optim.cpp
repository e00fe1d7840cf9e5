#include <vkgrad/nn/optim.hpp>

#include <cmath>
#include <iomanip>
#include <numbers>
#include <sstream>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

namespace {

void check_params(const std::vector<Tensor>& params, std::string_view who) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].dtype().is_float())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " +
                  shape_str(params[i].shape()) + " is " + params[i].dtype().name() +
                  ", not a float tensor");
    if (!params[i].requires_grad())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " +
                  shape_str(params[i].shape()) + " does not require grad");
    if (!params[i].is_leaf())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " +
                  shape_str(params[i].shape()) +
                  " is computed from other tensors; optimize the tensors with requires_grad_ it "
                  "comes from");
  }
}

void check_range(double v, double lo, double hi, std::string_view who, std::string_view what) {
  if (!(v >= lo && v <= hi))
    throw Error(std::string(who) + ": " + std::string(what) + " must be in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

// States are clone()s, buffers of their own that assign writes in place: a contiguous() of an
// equal constant realized while another one's node is alive (another thread's optimizer, made at
// the same moment) would be that state's buffer.
Tensor zeros_state(const Tensor& p, const Shape& shape) {
  return Tensor::zeros(shape, p.dtype(), p.device()).clone().realize();
}

std::string device_of(const std::vector<Tensor>& params) {
  return params.empty() ? default_device() : params[0].device();
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr, std::string_view who)
    : params_(std::move(params)),
      device_(device_of(params_)),
      lr_(lr),
      lr_tensor_(std::vector<float>{float(lr)}, Shape{}, device_) {
  check_params(params_, who);
  check_range(lr, 0.0, INFINITY, who, "lr");
}

Tensor Optimizer::scalar(double v) const {
  return Tensor(std::vector<float>{float(v)}, Shape{}, device_);
}

void Optimizer::set_lr(double lr) {
  check_range(lr, 0.0, INFINITY, "set_lr", "lr");
  lr_ = lr;
  // Written now, in place: a captured step (vkg::Jit) reads the learning rate from this buffer.
  lr_tensor_.assign(scalar(lr)).realize();
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(std::nullopt);
}

void Optimizer::step(std::vector<Tensor> also_realize) {
  ++steps_;
  std::vector<Tensor> out = std::move(also_realize);
  {
    NoGrad no_grad;
    begin_step(out);
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::optional<Tensor> g = params_[i].grad();
      if (!g) continue;
      Tensor next = update(i, g->detach(), out).cast(params_[i].dtype());
      params_[i].assign(next);
      out.push_back(params_[i]);
    }
  }
  realize_all(std::move(out));
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov,
         double dampening)
    : Optimizer(std::move(params), lr, "SGD"),
      momentum_(momentum),
      weight_decay_(weight_decay),
      dampening_(dampening),
      nesterov_(nesterov),
      velocity_(this->params().size()) {
  check_range(momentum, 0.0, INFINITY, "SGD", "momentum");
  check_range(weight_decay, 0.0, INFINITY, "SGD", "weight_decay");
  if (nesterov && (momentum <= 0 || dampening != 0))
    throw Error("SGD: nesterov momentum needs momentum > 0 and dampening 0");
}

Tensor SGD::update(size_t i, const Tensor& grad, std::vector<Tensor>& states) {
  const Tensor& p = params()[i];
  Tensor g = weight_decay_ != 0 ? grad + p * weight_decay_ : grad;
  if (momentum_ != 0) {
    if (!velocity_[i]) {
      velocity_[i] = g.contiguous();  // torch starts the buffer at the first gradient
    } else {
      velocity_[i]->assign(*velocity_[i] * momentum_ + g * (1.0 - dampening_));  // in place
    }
    states.push_back(*velocity_[i]);
    g = nesterov_ ? g + *velocity_[i] * momentum_ : *velocity_[i];
  }
  return p - lr_tensor() * g;
}

namespace {

// Parameters up to this many elements share one state tensor (nn/optim.hpp), up to kSharedMax
// elements in all. Each element of that kernel tests every part's range: the cost grows with the
// parts, which is little for biases and small weights but would slow a big weight's update (a
// 784x128 weight in it made its moments' kernel 3.5x slower on Lavapipe than in its own).
constexpr int64_t kSharedPartMax = 4096;
constexpr int64_t kSharedMax = 16384;

int64_t round_up4(int64_t n) { return (n + 3) / 4 * 4; }

// beta^t is kept in float32 (the shared tensor's betas column, nn/optim.hpp): a beta that rounds
// to 1 there would keep beta^t at 1, and the step would be 0 / 0.
void check_beta(double beta, std::string_view who, std::string_view what) {
  check_range(beta, 0.0, 1.0, who, what);
  if (float(beta) >= 1.0f) {
    std::ostringstream got;
    got << std::setprecision(17) << beta;
    throw Error(std::string(who) + ": " + std::string(what) + " must be below 1 in float32, got " +
                got.str() + ", which rounds to 1 (beta^t would stay 1 and the step be 0/0)");
  }
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled)
    : Optimizer(std::move(params), lr, decoupled ? "AdamW" : "Adam"),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled) {
  const char* who = decoupled ? "AdamW" : "Adam";
  check_beta(beta1, who, "beta1");
  check_beta(beta2, who, "beta2");
  check_range(eps, 0.0, INFINITY, who, "eps");
  check_range(weight_decay, 0.0, INFINITY, who, "weight_decay");
  const std::string dev = this->params().empty() ? default_device() : this->params()[0].device();
  int64_t n = 0;
  for (const Tensor& p : this->params()) {
    // A sharded parameter keeps moments of its own, on its devices: its part of the shared
    // tensor moved its gradient's shards across devices every step (17 kernels a step, not 7).
    const bool shared = p.dtype() == dtypes::float32 && p.device() == dev &&
                        !is_multi_device(p.device()) && p.numel() <= kSharedPartMax &&
                        n + round_up4(p.numel()) <= kSharedMax;
    offsets_.push_back(shared ? n : -1);
    if (shared) {
      n += round_up4(p.numel());
      moments_.emplace_back();
      continue;
    }
    moments_.emplace_back(std::pair{zeros_state(p, p.shape()), zeros_state(p, p.shape())});
  }
  betas_at_ = n;
  std::vector<float> init(size_t(2 * (n + 4)), 0.0f);
  init[size_t(n)] = init[size_t(2 * n + 4)] = 1.0f;  // beta1^0 and beta2^0
  shared_ = Tensor(init, {2, n + 4}, dev).realize();
}

Tensor Adam::gradient(size_t i, const Tensor& grad) const {
  return weight_decay_ != 0 && !decoupled_ ? grad + params()[i] * weight_decay_ : grad;
}

void Adam::begin_step(std::vector<Tensor>& states) {
  // The shared parts' new m and v (a part without a gradient keeps its own), then beta^t's
  // column, laid end to end: one elementwise kernel over the whole tensor, in place.
  const Tensor m = (*shared_)[0], v = (*shared_)[1];
  std::vector<Tensor> ms, vs;
  for (size_t i = 0; i < params().size(); ++i) {
    const int64_t at = offsets_[i], numel = params()[i].numel(), len = round_up4(numel);
    if (at < 0 || len == 0) continue;
    Tensor mi = m.shrink({{at, at + len}}), vi = v.shrink({{at, at + len}});
    if (const std::optional<Tensor> g = params()[i].grad()) {
      const Tensor gi = gradient(i, g->detach()).reshape({numel}).pad({{0, len - numel}});
      mi = mi * beta1_ + gi * (1.0 - beta1_);
      vi = vi * beta2_ + gi * gi * (1.0 - beta2_);
    }
    ms.push_back(mi);
    vs.push_back(vi);
  }
  const int64_t n = betas_at_ + 4;
  ms.push_back(m.shrink({{betas_at_, n}}) * beta1_);
  vs.push_back(v.shrink({{betas_at_, n}}) * beta2_);
  shared_->assign(Tensor::stack(std::vector<Tensor>{Tensor::cat(ms), Tensor::cat(vs)}, 0));
  states.push_back(*shared_);
  const Tensor b1_t = (*shared_)[0][betas_at_], b2_t = (*shared_)[1][betas_at_];
  const Tensor bias_correction2_sqrt = (1.0 - b2_t).sqrt();
  step_size_ = lr_tensor() * bias_correction2_sqrt / (1.0 - b1_t);
  eps_hat_ = bias_correction2_sqrt * eps_;
}

Tensor Adam::update(size_t i, const Tensor& grad, std::vector<Tensor>& states) {
  const Tensor& p = params()[i];
  const Tensor base = weight_decay_ != 0 && decoupled_ ? p - lr_tensor() * p * weight_decay_ : p;
  std::optional<Tensor> m, v;
  if (const int64_t at = offsets_[i]; at >= 0) {  // the moments begin_step wrote
    m = (*shared_)[0].shrink({{at, at + p.numel()}}).reshape(p.shape());
    v = (*shared_)[1].shrink({{at, at + p.numel()}}).reshape(p.shape());
  } else {
    auto& [mi, vi] = *moments_[i];
    const Tensor g = gradient(i, grad);
    mi.assign(mi * beta1_ + g * (1.0 - beta1_));  // in place; one kernel with v and p's
    vi.assign(vi * beta2_ + g * g * (1.0 - beta2_));
    states.push_back(mi);
    states.push_back(vi);
    m = mi;
    v = vi;
  }
  // torch's p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), with sqrt(bc2) moved into the
  // scalars (the paper's own form): one division per element, not two. Lavapipe divides in
  // software to round exactly (codegen/glsl_helpers_arithmetic.cpp), which made the two divisions
  // most of the update's time (a 784x128 weight on a loaded Lavapipe: 0.49 -> 0.42 ms, fastest of a
  // run).
  return base - *step_size_ * *m / (v->sqrt() + *eps_hat_);
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : opt_(opt), step_size_(step_size), gamma_(gamma), base_(opt.lr()) {
  if (step_size <= 0)
    throw Error("StepLR: step_size must be positive, got " + std::to_string(step_size));
}

void StepLR::step() {
  ++steps_;
  opt_.set_lr(base_ * std::pow(gamma_, double(steps_ / step_size_)));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : opt_(opt), t_max_(t_max), eta_min_(eta_min), base_(opt.lr()) {
  if (t_max <= 0)
    throw Error("CosineAnnealingLR: t_max must be positive, got " + std::to_string(t_max));
}

void CosineAnnealingLR::step() {
  ++steps_;
  // Past t_max the lr follows the cosine back up, as torch's closed form (no clamp).
  const double t = double(steps_);
  opt_.set_lr(eta_min_ +
              (base_ - eta_min_) * (1.0 + std::cos(std::numbers::pi * t / double(t_max_))) / 2.0);
}

}  // namespace vkg::nn
