// The number of times this process has called the global operator new: the
// benchmark binary replaces it (allocations.cpp) to count what an operation
// costs the allocator. (The C client's own mallocs are not counted.)
#pragma once

#include <cstdint>

namespace zkasio::bench {

std::uint64_t allocations_so_far() noexcept;

}  // namespace zkasio::bench
