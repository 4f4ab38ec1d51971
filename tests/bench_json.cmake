# Runs `zkasio-bench SUBCOMMAND ARGS... --json --samples DIR` against a server
# started for the purpose, and checks that stdout is exactly one JSON object
# with every expected key: LATENCY_KEYS are latency objects (with ROUNDS
# samples when ROUNDS is given, and as many lines in DIR/<key>.txt),
# VALUE_KEYS plain values; EXPECT is a list of key=value that must hold.
set(work "${WORK_DIR}/bench-${SUBCOMMAND}")
file(REMOVE_RECURSE "${work}")
# The shell owns the server: it is stopped when the bench ends, and by the
# watchdog if the shell is killed.
execute_process(
  COMMAND bash -c [[
    zk=$1 dir=$2; shift 2
    trap '"$zk" stop "$dir" >/dev/null' EXIT
    hosts=$("$zk" start "$dir" --owner-pid $$) || exit 1
    "$@" --hosts "$hosts"
  ]] bench-json "${SOURCE_DIR}/scripts/zk" "${work}/server" "${BENCH}" ${SUBCOMMAND} ${ARGS}
          --json --samples "${work}/samples"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status TIMEOUT 150)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "zkasio-bench ${SUBCOMMAND} failed (${status}): ${err}")
endif()
string(STRIP "${out}" out)
string(JSON type ERROR_VARIABLE json_error TYPE "${out}")
if(json_error OR NOT type STREQUAL "OBJECT")
  message(FATAL_ERROR "not one JSON object on stdout: ${out}")
endif()
foreach(key IN LISTS LATENCY_KEYS)
  foreach(field p50 p90 p99 max n)
    string(JSON value ERROR_VARIABLE json_error GET "${out}" ${key} ${field})
    if(json_error)
      message(FATAL_ERROR "key ${key}.${field} missing in: ${out}")
    endif()
  endforeach()
  string(JSON n GET "${out}" ${key} n)
  file(STRINGS "${work}/samples/${key}.txt" samples)
  list(LENGTH samples lines)
  if(NOT lines EQUAL n OR n EQUAL 0 OR (DEFINED ROUNDS AND NOT n EQUAL ROUNDS))
    message(FATAL_ERROR "${key}.n is ${n} with ${lines} samples written, expected ${ROUNDS}: ${out}")
  endif()
endforeach()
foreach(key IN LISTS VALUE_KEYS)
  string(JSON value ERROR_VARIABLE json_error GET "${out}" ${key})
  if(json_error)
    message(FATAL_ERROR "key ${key} missing in: ${out}")
  endif()
endforeach()
foreach(expectation IN LISTS EXPECT)
  string(REPLACE "=" ";" pair "${expectation}")
  list(GET pair 0 key)
  list(GET pair 1 expected)
  string(JSON value GET "${out}" ${key})
  if(NOT value STREQUAL expected)
    message(FATAL_ERROR "${key} is ${value}, not ${expected}: ${out}")
  endif()
endforeach()
message(STATUS "${SUBCOMMAND}: ${out}")
