// The error code every zkasio operation completes with, and the exception
// that carries one: those of the Asio zkasio is built over, so that every
// token (use_awaitable and use_future throwing, redirect_error, as_tuple)
// treats the code as the error, and one catch clause takes what Asio's
// tokens throw and what zkasio throws itself (a constructor's invalid_path,
// with_lock's lock_lost). std::error_code and std::system_error over
// standalone Asio; boost::system::error_code and boost::system::system_error
// over Boost.Asio (ZKASIO_BOOST_ASIO): that code converts to and from
// std::error_code and compares with zkasio's codes and conditions
// (error.hpp), and std::errc, as a std::error_code does.
#pragma once

#include <system_error>

#if defined(ZKASIO_BOOST_ASIO)
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#endif

namespace zkasio {

#if defined(ZKASIO_BOOST_ASIO)
using error_code = boost::system::error_code;
using system_error = boost::system::system_error;
#else
using error_code = std::error_code;
using system_error = std::system_error;
#endif

}  // namespace zkasio
