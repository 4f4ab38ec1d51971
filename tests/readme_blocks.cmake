# The C++ blocks of README.md and of every page under docs/, so that the
# documentation cannot rot: included by tests/CMakeLists.txt at configure time
# (again whenever a page changes or one is added). Every block is compiled; a
# complete program (one with a main) is built as readme_program_<N> and run
# against a real server by test_readme, with its "127.0.0.1:2181" replaced by
# readme_hosts() (readme_prelude.hpp). Other blocks are fragments: compiled in
# a namespace of their own, their #include lines first, with the helpers they
# mention declared by the prelude. The generated files name their page, so a
# compiler error says which page's block broke.
file(GLOB_RECURSE doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
list(SORT doc_pages)
set(readme_pages ${PROJECT_SOURCE_DIR}/README.md ${doc_pages})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${readme_pages})
set(readme_dir ${CMAKE_CURRENT_BINARY_DIR}/readme)
file(REMOVE_RECURSE ${readme_dir})
set(fence "```")
set(block 0)
set(readme_fragments)
set(readme_programs)
foreach(page ${readme_pages})
  file(RELATIVE_PATH page_name ${PROJECT_SOURCE_DIR} ${page})
  file(READ ${page} rest)
  while(TRUE)
    string(FIND "${rest}" "${fence}cpp\n" start)
    if(start EQUAL -1)
      break()
    endif()
    math(EXPR start "${start} + 7")
    string(SUBSTRING "${rest}" ${start} -1 rest)
    string(FIND "${rest}" "\n${fence}" end)
    if(end EQUAL -1)
      message(FATAL_ERROR "${page_name}: a cpp block does not end")
    endif()
    string(SUBSTRING "${rest}" 0 ${end} code)
    string(SUBSTRING "${rest}" ${end} -1 rest)
    math(EXPR block "${block} + 1")
    set(origin "// ${page_name}, C++ block ${block}\n")
    if(code MATCHES "int main\\(")
      string(REPLACE "\"127.0.0.1:2181\"" "readme_hosts()" code "${code}")
      file(WRITE ${readme_dir}/program_${block}.cpp "${origin}#include \"readme_prelude.hpp\"\n${code}\n")
      list(APPEND readme_programs ${block})
    else()
      # #include lines go before the namespace.
      string(REGEX MATCHALL "#include [^\n]*" includes "${code}")
      string(REGEX REPLACE "#include [^\n]*" "" body "${code}")
      list(JOIN includes "\n" includes)
      file(WRITE ${readme_dir}/fragment_${block}.cpp
           "${origin}#include \"readme_prelude.hpp\"\n${includes}\nnamespace readme_block_${block} {\n${body}\n}\n")
      list(APPEND readme_fragments ${readme_dir}/fragment_${block}.cpp)
    endif()
  endwhile()
endforeach()
if(block EQUAL 0)
  message(FATAL_ERROR "README.md and docs/: no cpp block found")
endif()

# The fragments, compiled in one unit (each in its namespace, and a
# compiler's message names its fragment's file, which names its page):
# their headers parsed once, not once each (two minutes of a build).
set(fragments_unit "")
foreach(fragment ${readme_fragments})
  string(APPEND fragments_unit "#include \"${fragment}\"\n")
endforeach()
file(WRITE ${readme_dir}/fragments.cpp "${fragments_unit}")
add_library(readme_fragments OBJECT ${readme_dir}/fragments.cpp)
target_include_directories(readme_fragments PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(readme_fragments PRIVATE zkasio::zkasio zkasio_warnings)
# (A lambda in an included file counts for g++ as one in a header, which it
# warns of when a template holds it: here it is the unit's own.)
target_compile_options(readme_fragments PRIVATE -Wno-subobject-linkage)
# Compiled, never run: checked in the stages that check compilation (the
# default and Boost.Asio ones), not under the sanitizers.
if(NOT ZKASIO_SANITIZE)
  add_dependencies(tier_unit readme_fragments)
endif()
set(readme_program_files)
foreach(n ${readme_programs})
  add_executable(readme_program_${n} ${readme_dir}/program_${n}.cpp)
  target_include_directories(readme_program_${n} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(readme_program_${n} PRIVATE zkasio::zkasio zkasio_warnings)
  list(APPEND readme_program_files $<TARGET_FILE:readme_program_${n}>)
endforeach()
