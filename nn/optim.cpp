#include <vkgrad/nn/optim.hpp>

#include <cmath>
#include <numbers>

#include <vkgrad/core/error.hpp>
#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

namespace {

void check_params(const std::vector<Tensor>& params, std::string_view who) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].dtype().is_float())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " + shape_str(params[i].shape()) + " is " +
                  params[i].dtype().name() + ", not a float tensor");
    if (!params[i].requires_grad())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " + shape_str(params[i].shape()) +
                  " does not require grad");
    if (!params[i].is_leaf())
      throw Error(std::string(who) + ": parameter " + std::to_string(i) + " " +
                  shape_str(params[i].shape()) +
                  " is computed from other tensors; optimize the tensors with requires_grad_ it "
                  "comes from");
  }
}

void check_range(double v, double lo, double hi, std::string_view who, std::string_view what) {
  if (!(v >= lo && v <= hi))
    throw Error(std::string(who) + ": " + std::string(what) + " must be in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "], got " + std::to_string(v));
}

// States are clone()s, buffers of their own that assign writes in place: a contiguous() of an
// equal constant realized while another one's node is alive (another thread's optimizer, made at
// the same moment) would be that state's buffer.
Tensor zeros_state(const Tensor& p, const Shape& shape) {
  return Tensor::zeros(shape, p.dtype(), p.device()).clone().realize();
}

// A realized float32 (1, 1) on the parameters' device, a state to multiply in place.
Tensor ones_state(const std::vector<Tensor>& params) {
  return Tensor::ones({2}, dtypes::float32, params.empty() ? default_device() : params[0].device())
      .clone()
      .realize();
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

Tensor Optimizer::scalar(double v) const { return Tensor(std::vector<float>{float(v)}, Shape{}, device_); }

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

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled)
    : Optimizer(std::move(params), lr, decoupled ? "AdamW" : "Adam"),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      betas_t_(ones_state(this->params())) {
  const char* who = decoupled ? "AdamW" : "Adam";
  check_range(beta1, 0.0, 1.0 - 1e-12, who, "beta1");
  check_range(beta2, 0.0, 1.0 - 1e-12, who, "beta2");
  check_range(eps, 0.0, INFINITY, who, "eps");
  check_range(weight_decay, 0.0, INFINITY, who, "weight_decay");
  for (const Tensor& p : this->params()) {
    Shape pair = p.shape();
    pair.insert(pair.begin(), 2);
    moments_.push_back(zeros_state(p, pair));
  }
}

void Adam::begin_step(std::vector<Tensor>& states) {
  // (beta1, beta2) as a constant pair: where i is 0, beta1, else beta2.
  const Tensor i = Tensor::arange(0, 2, 1, betas_t_.device());
  betas_t_.assign(betas_t_ * i.eq(0).where(beta1_, beta2_).cast(dtypes::float32));
  states.push_back(betas_t_);
  const Tensor bias_correction2_sqrt = (1.0 - betas_t_[1]).sqrt();
  step_size_ = lr_tensor() * bias_correction2_sqrt / (1.0 - betas_t_[0]);
  eps_hat_ = bias_correction2_sqrt * eps_;
}

Tensor Adam::update(size_t i, const Tensor& grad, std::vector<Tensor>& states) {
  const Tensor& p = params()[i];
  Tensor g = grad;
  Tensor base = p;
  if (weight_decay_ != 0) {
    if (decoupled_)
      base = p - lr_tensor() * p * weight_decay_;
    else
      g = g + p * weight_decay_;
  }
  Tensor& moments = moments_[i];
  const Tensor m = moments[0] * beta1_ + g * (1.0 - beta1_);
  const Tensor v = moments[1] * beta2_ + g * g * (1.0 - beta2_);
  moments.assign(Tensor::stack(std::vector<Tensor>{m, v}, 0));
  states.push_back(moments);
  // torch's p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), with sqrt(bc2) moved into the
  // scalars (the paper's own form): one division per element, not two. Lavapipe divides in
  // software to round exactly (codegen/glsl_helpers.cpp), which made the two divisions most of
  // the update's time (a 784x128 weight on a loaded Lavapipe: 0.49 -> 0.42 ms, fastest of a run).
  return base - *step_size_ * moments[0] / (moments[1].sqrt() + *eps_hat_);
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : opt_(opt), step_size_(step_size), gamma_(gamma), base_(opt.lr()) {
  if (step_size <= 0) throw Error("StepLR: step_size must be positive, got " + std::to_string(step_size));
}

void StepLR::step() {
  ++steps_;
  opt_.set_lr(base_ * std::pow(gamma_, double(steps_ / step_size_)));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : opt_(opt), t_max_(t_max), eta_min_(eta_min), base_(opt.lr()) {
  if (t_max <= 0) throw Error("CosineAnnealingLR: t_max must be positive, got " + std::to_string(t_max));
}

void CosineAnnealingLR::step() {
  ++steps_;
  // Past t_max the lr follows the cosine back up, as torch's closed form (no clamp).
  const double t = double(steps_);
  opt_.set_lr(eta_min_ + (base_ - eta_min_) * (1.0 + std::cos(std::numbers::pi * t / double(t_max_))) / 2.0);
}

}  // namespace vkg::nn
