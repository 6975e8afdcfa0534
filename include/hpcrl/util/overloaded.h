// One visitor from several lambdas, for std::visit over a std::variant:
//
//   std::visit(util::overloaded{[](const A& a) { ... }, [](const B& b) { ... }}, v);
//
// An alternative no lambda accepts is a compile error, so adding an
// alternative to a variant finds every visit that has to handle it.
#pragma once

namespace hpcrl::util {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

}  // namespace hpcrl::util
