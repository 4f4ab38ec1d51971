// What the scripted tests of the state machines without I/O share.
#pragma once

#include <doctest/doctest.h>

#include <system_error>
#include <variant>
#include <zkasio/error_code.hpp>

// The error a state machine's `fail` action carries (the test fails if the
// action is another).
template <class Machine>
zkasio::error_code failure(const typename Machine::action& a) {
  REQUIRE(std::holds_alternative<typename Machine::fail>(a));
  return std::get<typename Machine::fail>(a).ec;
}
