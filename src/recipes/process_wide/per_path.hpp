// One object of type T per (connect string, path) in the process: the
// process-wide tables of known_nodes and local_turns. An object lives while
// someone holds it; the table keeps weak references only.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace zkasio::detail {

template <class T>
std::shared_ptr<T> one_per_path(const std::string& hosts, const std::string& path) {
  static std::mutex table_guard;
  static std::map<std::pair<std::string, std::string>, std::weak_ptr<T>> table;
  std::lock_guard lock(table_guard);
  auto& slot = table[{hosts, path}];
  if (auto object = slot.lock()) return object;
  std::erase_if(table, [](auto& item) { return item.second.expired(); });
  auto object = std::make_shared<T>();
  table[{hosts, path}] = object;
  return object;
}

}  // namespace zkasio::detail
