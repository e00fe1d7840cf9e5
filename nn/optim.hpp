// Optimizers as torch.optim has them (same hyper-parameters and update rules).
//
//   nn::Adam opt(model.parameters(), 1e-3);
//   opt.zero_grad();
//   loss.backward();
//   opt.step({loss});   // one schedule: forward, backward, the update, and the loss
//
// step() builds each parameter's new value lazily, assigns it, and realizes every parameter and
// optimizer state (and the extra tensors given) in one schedule. The assigns write in place, so
// after the first step the parameters and states keep their buffers: a step captured by vkg::Jit
// replays over the same memory. The learning rate and the per-step factors (Adam's beta^t) are
// device tensors updated in place, not constants in the kernels, so a schedule of learning rates
// compiles no new kernels and a replayed step advances them as an eager one does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg::nn {

class Optimizer {
 public:
  // `who` names the optimizer in errors ("SGD", "Adam").
  Optimizer(std::vector<Tensor> params, double lr, std::string_view who = "Optimizer");
  virtual ~Optimizer() = default;
  // Clears the gradient of every parameter.
  void zero_grad();
  // Updates the parameters from their gradients (parameters without one are left alone), and
  // computes `also_realize` in the same schedule.
  void step(std::vector<Tensor> also_realize = {});
  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  int64_t steps_taken() const { return steps_; }

 protected:
  // The new value of params_[i] given its gradient (lazy), assigning the optimizer's own states as
  // needed; the states to realize go into `states`.
  virtual Tensor update(size_t i, const Tensor& grad, std::vector<Tensor>& states) = 0;
  // Called once per step before the updates, with steps_ already counted; the states it
  // assigns go into `states`.
  virtual void begin_step(std::vector<Tensor>& states) { (void)states; }
  // A 0-d float tensor holding v on the parameters' device.
  Tensor scalar(double v) const;
  // The learning rate as such a tensor.
  const Tensor& lr_tensor() const { return lr_tensor_; }

 private:
  std::vector<Tensor> params_;
  std::string device_;
  double lr_;
  Tensor lr_tensor_;
  int64_t steps_ = 0;
};

// Stochastic gradient descent with momentum (torch's form: v = momentum * v + (1 - dampening) * g,
// nesterov uses g + momentum * v) and L2 weight decay.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.0, double weight_decay = 0.0,
      bool nesterov = false, double dampening = 0.0);

 protected:
  Tensor update(size_t i, const Tensor& grad, std::vector<Tensor>& states) override;

 private:
  double momentum_, weight_decay_, dampening_;
  bool nesterov_;
  std::vector<std::optional<Tensor>> velocity_;
};

// Adam (L2 weight decay added to the gradient) and, with decoupled = true, AdamW (the weights
// shrink by lr * weight_decay directly).
//
// Unlike torch, the bias corrections 1 - beta^t count one t for all parameters, the optimizer's
// steps (as tinygrad's b1_t, b2_t): beta^t advances every step, also for a parameter that has no
// gradient in it (left alone then). torch keeps each parameter's own step count, advanced only
// when it has a gradient: a parameter that skipped steps gets a smaller correction here. The
// betas must be below 1 in float32 (beta^t is a float32 state), else the constructor throws.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0.0, bool decoupled = false);

 protected:
  Tensor update(size_t i, const Tensor& grad, std::vector<Tensor>& states) override;
  void begin_step(std::vector<Tensor>& states) override;

 private:
  // The gradient with L2 weight decay added (Adam, not AdamW).
  Tensor gradient(size_t i, const Tensor& grad) const;
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  // Small float32 parameters on one device (biases, small weights: see nn/optim.cpp; a sharded
  // one keeps moments of its own, on its devices) keep their state in one tensor, `shared_`, of
  // shape (2, n): row 0 holds each one's m flattened, from offsets_[i], row 1 its v, and the
  // column at betas_at_ holds (beta1^t, beta2^t) (as tinygrad's b1_t, b2_t).
  // One kernel updates it all: the parts' moments and, laid after them, that column multiplied
  // by (beta1, beta2). Each parameter's update reads its part. Every kernel is a Lavapipe
  // thread-pool dispatch of 15-25 us even when it has little to do: the MLP 784-128-10 step went
  // from 21 to 18 kernels. Offsets are multiples of 4 (zeros between parts, which stay zero).
  std::optional<Tensor> shared_;  // set by the constructor
  std::vector<int64_t> offsets_;  // -1 for a parameter with moments of its own
  int64_t betas_at_ = 0;
  // Each other parameter's first and second moments (m, v), tensors of its shape. The three
  // assigns of a step (m, v, the parameter) run over one iteration space, so the scheduler makes
  // them one kernel of three outputs (core/schedule_multi_output.hpp) that reads the gradient
  // once. (A (2, *p.shape) stack of m and v was one kernel, and the parameter's a second.)
  std::vector<std::optional<std::pair<Tensor, Tensor>>> moments_;
  // lr sqrt(1 - beta2^t) / (1 - beta1^t) and eps sqrt(1 - beta2^t): see Adam::update.
  std::optional<Tensor> step_size_, eps_hat_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2)
      : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
};

// Learning-rate schedules: call step() once per epoch (or per iteration, as you count).
// StepLR: lr = base * gamma^(floor(steps / step_size)).
class StepLR {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  void step();
  double lr() const { return opt_.lr(); }

 private:
  Optimizer& opt_;
  int64_t step_size_, steps_ = 0;
  double gamma_, base_;
};

// CosineAnnealingLR: lr = eta_min + (base - eta_min) * (1 + cos(pi * steps / t_max)) / 2, also
// past t_max (it rises again, with period 2 t_max), as torch.
class CosineAnnealingLR {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0.0);
  void step();
  double lr() const { return opt_.lr(); }

 private:
  Optimizer& opt_;
  int64_t t_max_, steps_ = 0;
  double eta_min_, base_;
};

}  // namespace vkg::nn
