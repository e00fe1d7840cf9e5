// Printing UOp graphs in tinygrad's nested form.
#include <ostream>
#include <unordered_map>

#include <vkgrad/core/uop.hpp>

namespace vkg {

namespace {

struct Printer {
  struct Seen {
    int index;      // the node's name: x<index>
    int uses = 0;   // how many source slots refer to it
    bool printed = false;
  };
  std::unordered_map<const UOp*, Seen> seen;
  std::string out;

  // Numbers every node in first-visit order and counts how often each is used as a source.
  void count(const UOp* root) {
    seen.emplace(root, Seen{0});
    std::vector<const UOp*> stack{root};
    while (!stack.empty()) {
      const UOp* n = stack.back();
      stack.pop_back();
      for (auto it = n->src.rbegin(); it != n->src.rend(); ++it) {
        auto [entry, fresh] = seen.try_emplace(it->get(), Seen{int(seen.size())});
        if (++entry->second.uses == 1) stack.push_back(it->get());
        (void)fresh;
      }
    }
  }

  void print(const UOp* n, int depth) {
    Seen& s = seen.at(n);
    out.append(size_t(depth), ' ');
    if (s.printed) {
      out += " x" + std::to_string(s.index);
      return;
    }
    s.printed = true;
    if (s.uses > 1) out += "x" + std::to_string(s.index) + ":=";
    out += "UOp(Ops." + std::string(op_name(n->op)) + ", dtypes." + n->dtype.name() +
           ", arg=" + arg_repr(n->arg) + ", src=(";
    for (const UOpPtr& child : n->src) {
      out += "\n";
      print(child.get(), depth + 2);
      out += ",";
    }
    out += "))";
  }
};

}  // namespace

std::string to_string(const UOpPtr& u) {
  if (!u) return "None";
  Printer p;
  p.count(u.get());
  p.print(u.get(), 0);
  return std::move(p.out);
}

std::ostream& operator<<(std::ostream& os, const UOpPtr& u) { return os << to_string(u); }

}  // namespace vkg
