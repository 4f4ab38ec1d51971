// Contender node names as Apache Curator's lock recipes write them. The
// queue a listing forms, and what a recipe does with it, are its rule's
// (src/recipes/rules/queue_rule.hpp).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zkasio/detail/node_kind.hpp>

namespace zkasio::detail {

// A sequential node's suffix: the parent's 32-bit counter, which the server
// writes with printf("%010d"), so that past 2^31 it is negative ("-2147483648",
// then on up to "-000000001", then "0000000000" again). Kept as the counter's
// bits: sequences compare in the counter's circular order (sequence_before).
using sequence_number = std::uint32_t;

// True when the counter reached `a` before `b`: `a` is less than half the
// counter's range behind `b` (a queue spans far less than 2^31 creates).
constexpr bool sequence_before(sequence_number a, sequence_number b) noexcept {
  return a != b && static_cast<std::uint32_t>(b - a) < 0x8000'0000u;
}

// The suffix's value, or nullopt unless it is exactly what the server writes.
std::optional<sequence_number> parse_sequence(std::string_view suffix);

// The lock name of a kind of node (node_kind.hpp).
std::string_view lock_name(node_kind kind) noexcept;

// "_c_<uuid>-<lock name><sequence>": Curator's protected name for a contender.
// (The uuid is read out of the name, not kept apart: a listing of thousands
// of contenders holds one string per node.)
struct lock_node {
  std::string name;
  node_kind kind = node_kind::lock;
  sequence_number sequence = 0;

  // The uuid in a parsed node's name (the 36 characters after "_c_").
  std::string_view uuid() const noexcept;
};

// A contender's uuid as text, held inline: every waiting contender keeps
// one, and a string of 36 characters would be one more allocation each.
class uuid_text {
 public:
  static constexpr std::size_t length = 36;
  uuid_text() = default;
  // The first `length` characters of `text`.
  template <class Text>
    requires std::convertible_to<const Text&, std::string_view>
  uuid_text(const Text& text) {  // NOLINT: converts as a string does
    std::string_view view = text;
    size_ = static_cast<std::uint8_t>(view.copy(chars_.data(), length));
  }
  operator std::string_view() const noexcept { return {chars_.data(), size_}; }
  std::string_view view() const noexcept { return *this; }

 private:
  std::array<char, length> chars_{};
  std::uint8_t size_ = 0;
};

// A random (version 4) UUID in canonical text form; never the same in a
// forked child as in its parent.
uuid_text make_uuid();

// What a contender passes to a sequential create: "_c_<uuid>-<lock name>".
std::string lock_node_prefix(std::string_view uuid, node_kind kind = node_kind::lock);
// The node's parts, or nullopt for a name that is no contender's node.
std::optional<lock_node> parse_lock_node(std::string_view name);
// The same, without a copy of the name (a lookup by name needs no more).
struct lock_node_key {
  node_kind kind;
  sequence_number sequence;
};
std::optional<lock_node_key> parse_lock_node_key(std::string_view name);

}  // namespace zkasio::detail
