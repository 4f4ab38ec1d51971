// The floor: the same operations with the raw C client and poll(), no Asio
// and no zkasio: what ZooKeeper itself allows on this machine.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "latency.hpp"
#include "support/raw_client.hpp"

namespace zkasio::bench {
namespace {

using test::raw_client;

struct reply {
  bool done = false;
  int rc = ZOK;
};
void on_void(int rc, const void* context) {
  auto* r = static_cast<reply*>(const_cast<void*>(context));
  r->done = true;
  r->rc = rc;
}
void on_string(int rc, const char*, const void* context) { on_void(rc, context); }
void on_stat(int rc, const Stat*, const void* context) { on_void(rc, context); }
void on_strings(int rc, const String_vector*, const void* context) { on_void(rc, context); }

struct deletion {
  bool seen = false;
  clock::time_point at;
};
void on_event(zhandle_t*, int type, int, const char*, void* context) {
  if (type != ZOO_DELETED_EVENT) return;
  auto* d = static_cast<deletion*>(context);
  d->seen = true;
  d->at = clock::now();
}

// Pumps until done; a missing reply ends the run (the replies live on this
// stack, so there is no going on without them).
void wait(std::initializer_list<raw_client*> clients, const std::function<bool()>& done) {
  if (!test::run_until(clients, done, std::chrono::seconds(10))) {
    std::cerr << "zkasio-bench floor: no reply within 10 s\n";
    std::_Exit(1);
  }
}
void check(int rc, const char* what) {
  if (rc == ZOK) return;
  std::cerr << "zkasio-bench floor: " << what << ": " << zerror(rc) << '\n';
  std::_Exit(1);
}

}  // namespace

report run_floor(const options& o) {
  raw_client a(o.hosts), b(o.hosts);
  // As zkasio does: not a host name resolution on every zookeeper_interest.
  zoo_set_servers_resolution_delay(a.handle(), 30'000);
  zoo_set_servers_resolution_delay(b.handle(), 30'000);
  wait({&a, &b}, [&] { return a.connected() && b.connected(); });
  const std::string dir = "/zkasio-bench-floor-" + std::to_string(getpid());
  check(a.create(dir), "create the directory");

  report r;
  operation_latencies ops(r);
  auto* zh = a.handle();
  for (int i = 0; i < o.rounds; ++i) {
    auto path = dir + "/n" + std::to_string(i);
    reply c, l, e, d;

    auto t0 = clock::now();
    zoo_acreate(zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, on_string, &c);
    wait({&a}, [&] { return c.done; });
    ops.create.add(clock::now() - t0);
    check(c.rc, "create");

    t0 = clock::now();
    zoo_aget_children(zh, dir.c_str(), 0, on_strings, &l);
    wait({&a}, [&] { return l.done; });
    ops.get_children.add(clock::now() - t0);
    check(l.rc, "get_children");

    t0 = clock::now();
    zoo_aexists(zh, path.c_str(), 0, on_stat, &e);
    wait({&a}, [&] { return e.done; });
    ops.exists.add(clock::now() - t0);
    check(e.rc, "exists");

    // notify: b watches the node, a deletes it; from a's submit to b's event.
    reply w;
    deletion seen;
    zoo_awexists(b.handle(), path.c_str(), on_event, &seen, on_stat, &w);
    wait({&b}, [&] { return w.done; });
    t0 = clock::now();
    zoo_adelete(zh, path.c_str(), -1, on_void, &d);
    wait({&a, &b}, [&] { return d.done && seen.seen; });
    ops.notify.add(seen.at - t0);
    check(d.rc, "delete");

    // delete alone, and create + get_children back to back.
    reply c2, d2, c3, l3;
    zoo_acreate(zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, on_string, &c2);
    wait({&a}, [&] { return c2.done; });
    t0 = clock::now();
    zoo_adelete(zh, path.c_str(), -1, on_void, &d2);
    wait({&a}, [&] { return d2.done; });
    ops.remove.add(clock::now() - t0);
    check(d2.rc, "delete");

    t0 = clock::now();
    zoo_acreate(zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, on_string, &c3);
    zoo_aget_children(zh, dir.c_str(), 0, on_strings, &l3);
    wait({&a}, [&] { return c3.done && l3.done; });
    ops.pipelined.add(clock::now() - t0);
    check(c3.rc, "pipelined create");
    check(a.remove(path), "cleanup");
  }
  check(a.remove(dir), "remove the directory");
  return r;
}

}  // namespace zkasio::bench
