# Finds the single-threaded ZooKeeper C client (Debian: libzookeeper-st-dev),
# which ships no CMake config. Defines ZooKeeper::zookeeper_st.
find_path(ZooKeeperC_INCLUDE_DIR NAMES zookeeper/zookeeper.h)
find_library(ZooKeeperC_LIBRARY NAMES zookeeper_st)
if(ZooKeeperC_INCLUDE_DIR AND EXISTS "${ZooKeeperC_INCLUDE_DIR}/zookeeper/zookeeper_version.h")
  file(STRINGS "${ZooKeeperC_INCLUDE_DIR}/zookeeper/zookeeper_version.h" _zk_version_line
       REGEX "^#define ZOO_VERSION \"[0-9.]+\"")
  string(REGEX REPLACE "^#define ZOO_VERSION \"([0-9.]+)\".*" "\\1" ZooKeeperC_VERSION "${_zk_version_line}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeperC
  REQUIRED_VARS ZooKeeperC_LIBRARY ZooKeeperC_INCLUDE_DIR VERSION_VAR ZooKeeperC_VERSION)

if(ZooKeeperC_FOUND AND NOT TARGET ZooKeeper::zookeeper_st)
  add_library(ZooKeeper::zookeeper_st UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_st PROPERTIES
    IMPORTED_LOCATION "${ZooKeeperC_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeperC_INCLUDE_DIR}")
endif()
mark_as_advanced(ZooKeeperC_INCLUDE_DIR ZooKeeperC_LIBRARY)
