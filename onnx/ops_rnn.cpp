// Recurrent layers (RNN, GRU, LSTM) unrolled over the sequence as lazy tensor ops: the input
// projections of all steps are one matmul, each step adds its recurrent matmul and gates, and the
// whole unrolled graph fuses and realizes as any other. Gate orders are ONNX's (GRU: z r h; LSTM:
// i o f c); sequence_lens freezes a finished sequence's state and zeroes its outputs.
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

using Act = std::function<Tensor(const Tensor&)>;

Act activation(OpContext& c, const std::string& name, float alpha, float beta) {
  if (name == "Sigmoid") return [](const Tensor& x) { return x.sigmoid(); };
  if (name == "Tanh") return [](const Tensor& x) { return x.tanh(); };
  if (name == "Relu") return [](const Tensor& x) { return x.relu(); };
  if (name == "LeakyRelu") return [alpha](const Tensor& x) { return x.leaky_relu(alpha); };
  if (name == "ThresholdedRelu")
    return [alpha](const Tensor& x) { return x.gt(double(alpha)).where(x, 0.0); };
  if (name == "ScaledTanh")
    return [alpha, beta](const Tensor& x) { return (x * beta).tanh() * alpha; };
  if (name == "HardSigmoid")
    return [alpha, beta](const Tensor& x) { return (x * alpha + beta).clip(0.0, 1.0); };
  if (name == "Elu") return [alpha](const Tensor& x) { return x.elu(alpha); };
  if (name == "Softsign") return [](const Tensor& x) { return x.softsign(); };
  if (name == "Softplus") return [](const Tensor& x) { return x.softplus(); };
  if (name == "Affine") return [alpha, beta](const Tensor& x) { return x * alpha + beta; };
  c.unsupported("activation '" + name + "'");
}

enum class Cell { Rnn, Gru, Lstm };

OpFn recurrent(Cell cell) {
  return [cell](OpContext& c) -> std::vector<Value> {
    const int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
    const int64_t hidden = c.attr_i("hidden_size", 0);
    if (hidden <= 0) c.fail("hidden_size must be given");
    const std::string dir = c.attr_s("direction", "forward");
    const int64_t dirs = dir == "bidirectional" ? 2 : 1;
    const bool layout1 = c.attr_i("layout", 0) != 0;
    Tensor x = c.in(0);
    if (layout1) x = x.transpose(0, 1);  // to (seq, batch, input)
    const int64_t seq = x.shape()[0], batch = x.shape()[1];
    const auto clip = c.attr_f("clip");
    const bool before_reset = c.attr_i("linear_before_reset", 0) != 0;
    if (c.attr_i("input_forget", 0) != 0) c.unsupported("input_forget = 1");
    // Activations: per direction, the cell's count of them.
    const int64_t per = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
    std::vector<std::string> names;
    if (const auto* a = c.attr("activations"))
      for (const auto& s : a->strings()) names.push_back(s);
    const auto alphas = c.attr_floats("activation_alpha").value_or(std::vector<float>{});
    const auto betas = c.attr_floats("activation_beta").value_or(std::vector<float>{});
    const std::vector<std::string> defaults =
        cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
        : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    std::vector<Act> acts;
    for (int64_t i = 0; i < per * dirs; ++i) {
      const std::string n = size_t(i) < names.size() ? names[size_t(i)] : defaults[size_t(i % per)];
      const float al = size_t(i) < alphas.size() ? alphas[size_t(i)]
                                                 : (n == "LeakyRelu"     ? 0.01f
                                                    : n == "HardSigmoid" ? 0.2f
                                                                         : 1.0f);
      const float be = size_t(i) < betas.size() ? betas[size_t(i)]
                                                : (n == "HardSigmoid" ? 0.5f
                                                   : n == "Affine"    ? 0.0f
                                                                      : 1.0f);
      acts.push_back(activation(c, n, al, be));
    }
    std::optional<Tensor> lens;
    if (c.has(4)) lens = c.in(4).cast(dtypes::int64).reshape(Shape{batch, 1});
    auto initial = [&](size_t i) -> std::optional<Tensor> {
      if (!c.has(i)) return std::nullopt;
      Tensor t = c.in(i);
      return layout1 ? t.transpose(0, 1) : t;
    };
    const auto h0 = initial(5), c0 = cell == Cell::Lstm ? initial(6) : std::nullopt;
    std::vector<Tensor> ys, hs, cs;
    for (int64_t d = 0; d < dirs; ++d) {
      const bool reverse = dir == "reverse" || d == 1;
      if (reverse && lens) {
        for (int64_t v : c.ints_in(4))
          if (v != seq)
            c.unsupported("reverse direction with sequence_lens shorter than the sequence");
      }
      const Tensor w = c.in(1)[d], r = c.in(2)[d];  // (gates*H, I), (gates*H, H)
      Tensor xw = x.matmul(w.transpose());          // (seq, batch, gates*H)
      std::optional<Tensor> rb;
      if (c.has(3)) {
        const Tensor b = c.in(3)[d];
        xw = xw + b.shrink({{0, gates * hidden}});
        rb = b.shrink({{gates * hidden, 2 * gates * hidden}});
      }
      auto gate = [&](const Tensor& t, int64_t g) {
        return t.shrink({{0, t.shape()[0]}, {g * hidden, (g + 1) * hidden}});
      };
      auto clipped = [&](const Tensor& t) {
        return clip ? t.clip(-double(*clip), double(*clip)) : t;
      };
      const Act* f = &acts[size_t(d * per)];
      Tensor h = h0 ? (*h0)[d] : Tensor::zeros(Shape{batch, hidden}, x.dtype(), x.device());
      Tensor cstate = c0 ? (*c0)[d] : Tensor::zeros(Shape{batch, hidden}, x.dtype(), x.device());
      std::optional<Tensor> peep;
      if (cell == Cell::Lstm && c.has(7)) peep = c.in(7)[d];
      std::vector<Tensor> steps(size_t(seq), h);
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t t = reverse ? seq - 1 - s : s;
        const Tensor xt = xw[t];
        Tensor hr = h.matmul(r.transpose());
        if (rb) hr = hr + *rb;
        Tensor nh = h, nc = cstate;
        if (cell == Cell::Rnn) {
          nh = f[0](clipped(xt + hr));
        } else if (cell == Cell::Gru) {
          const Tensor z = f[0](clipped(gate(xt, 0) + gate(hr, 0)));
          const Tensor rr = f[0](clipped(gate(xt, 1) + gate(hr, 1)));
          Tensor cand = [&] {
            if (before_reset) return gate(xt, 2) + rr * gate(hr, 2);
            const Tensor rh =
                (rr * h).matmul(r.shrink({{2 * hidden, 3 * hidden}, {0, hidden}}).transpose());
            return rb ? gate(xt, 2) + rh + rb->shrink({{2 * hidden, 3 * hidden}})
                      : gate(xt, 2) + rh;
          }();
          const Tensor hh = f[1](clipped(cand));
          nh = (1.0f - z) * hh + z * h;
        } else {
          Tensor gi = gate(xt, 0) + gate(hr, 0), go = gate(xt, 1) + gate(hr, 1);
          Tensor gf = gate(xt, 2) + gate(hr, 2);
          const Tensor gc = gate(xt, 3) + gate(hr, 3);
          if (peep) {
            gi = gi + peep->shrink({{0, hidden}}) * cstate;
            gf = gf + peep->shrink({{2 * hidden, 3 * hidden}}) * cstate;
          }
          const Tensor i = f[0](clipped(gi)), fg = f[0](clipped(gf)), cc = f[1](clipped(gc));
          nc = fg * cstate + i * cc;
          if (peep) go = go + peep->shrink({{hidden, 2 * hidden}}) * nc;
          nh = f[0](clipped(go)) * f[2](nc);
        }
        Tensor out = nh;
        if (lens) {
          const Tensor live = Tensor::full({}, t, dtypes::int64, x.device()).lt(*lens);
          nh = live.where(nh, h);
          nc = live.where(nc, cstate);
          out = live.where(out, out * 0);
        }
        h = nh, cstate = nc;
        steps[size_t(t)] = out;
      }
      ys.push_back(Tensor::stack(steps, 0));  // (seq, batch, H)
      hs.push_back(h);
      cs.push_back(cstate);
    }
    Tensor y = Tensor::stack(ys, 1);  // (seq, dirs, batch, H)
    Tensor yh = Tensor::stack(hs, 0), yc = Tensor::stack(cs, 0);
    if (layout1) {
      y = y.permute({2, 0, 1, 3});
      yh = yh.transpose(0, 1), yc = yc.transpose(0, 1);
    }
    if (cell == Cell::Lstm) return {y, yh, yc};
    return {y, yh};
  };
}

}  // namespace

void add_rnn_ops(OpTable& t) {
  t["RNN"] = recurrent(Cell::Rnn);
  t["GRU"] = recurrent(Cell::Gru);
  t["LSTM"] = recurrent(Cell::Lstm);
}

}  // namespace vkg::onnx
