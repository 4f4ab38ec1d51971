"""The kazoo peer of zkasio-bench: kazoo's Lock recipe measured with the same
protocol, the same command line and the same JSON as zkasio's.

  kazoo SUBCOMMAND --hosts H [--rounds N] [--contenders C] [--sessions S]
        [--seconds D] [--hold-us H] [--samples DIR] [--json]

  handoff      two sessions (two KazooClients, two threads: Lock.acquire blocks)
               ping-pong one lock; the holder sleeps 2 ms (so the other is
               surely queued), stamps t_release and releases; the other stamps
               t_acquired when acquire() returns. Key "handoff".
  uncontended  one acquire plus one release, nobody else contending. Key
               "acquire_release".
  throughput   C threads over S clients (round-robin) loop on one lock: acquire,
               hold H microseconds (a busy-wait on perf_counter_ns, precise for
               short holds), stamp t_release, release. Keys "acquisitions_per_s"
               and "handoff" (t_acquired minus the previous holder's t_release,
               the first acquisition skipped).

Each holder checks in-process that nobody else holds the lock (a counter
raised after acquire returns, lowered before release). Under the GIL the check
sees an overlap only when the hold lets another thread run: the 2 ms sleep of
handoff does, a hold of 0 in throughput seldom does.

Warm-up before measuring: 20 untimed rounds (handoff, uncontended), 0.5 s
untimed at the same settings (throughput). Latencies are in microseconds,
percentiles by nearest rank. With --samples DIR each latency's raw samples also
go to DIR/<key>.txt, one per line. Every lock node lives under
/zkasio-bench-kazoo-<pid>, deleted at the end. Exit status: 0 done, 1 failure
(including two holders seen at once), 2 bad arguments.
"""

import json
import logging
import math
import os
import sys
import threading
import time

USAGE = """usage: kazoo SUBCOMMAND --hosts H [--rounds N] [--contenders C] [--sessions S]
             [--seconds D] [--hold-us H] [--samples DIR] [--json]
subcommands: handoff, uncontended, throughput
--hosts defaults to $ZKASIO_HOSTS, then 127.0.0.1:2181; latencies are in microseconds.
"""

WARMUP_ROUNDS = 20
WARMUP_SECONDS = 0.5
now = time.perf_counter_ns


class Usage(Exception):
    pass


def parse(argv):
    if not argv:
        raise Usage("missing SUBCOMMAND")
    o = {
        "command": argv[0],
        "hosts": os.environ.get("ZKASIO_HOSTS") or "127.0.0.1:2181",
        "rounds": 200, "contenders": 4, "sessions": 1, "seconds": 3.0, "hold_us": 0,
        "samples": None, "json": False,
    }
    if o["command"] not in ("handoff", "uncontended", "throughput"):
        raise Usage("unknown subcommand '%s'" % o["command"])
    integers = {"--rounds": (1, 10_000_000), "--contenders": (1, 10_000),
                "--sessions": (1, 1_000), "--hold-us": (0, 10_000_000)}
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            o["json"] = True
            i += 1
            continue
        if arg not in ("--hosts", "--samples", "--seconds") and arg not in integers:
            raise Usage("unknown option '%s'" % arg)
        if i + 1 >= len(argv):
            raise Usage("%s needs a value" % arg)
        value = argv[i + 1]
        i += 2
        if arg in integers:
            low, high = integers[arg]
            try:
                n = int(value, 10)
            except ValueError:
                n = None
            if n is None or not low <= n <= high:
                raise Usage("%s must be a number from %d to %d, not '%s'" % (arg, low, high, value))
            o[arg[2:].replace("-", "_")] = n
        elif arg == "--seconds":
            try:
                d = float(value)
            except ValueError:
                d = float("nan")
            if not 0 < d <= 86400:
                raise Usage("--seconds must be a positive number of seconds, not '%s'" % value)
            o["seconds"] = d
        else:
            if not value:
                raise Usage("%s must not be empty" % arg)
            o[arg[2:]] = value
    return o


class Samples:
    """Latency samples in nanoseconds."""

    def __init__(self):
        self.values = []
        self.lock = threading.Lock()

    def add(self, ns):
        with self.lock:
            self.values.append(ns)


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    rank = math.ceil(p / 100 * len(sorted_values))
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1] / 1000.0


def latency(samples):
    v = sorted(samples.values)
    return {"p50": round(percentile(v, 50), 1), "p90": round(percentile(v, 90), 1),
            "p99": round(percentile(v, 99), 1), "max": round(percentile(v, 100), 1), "n": len(v)}


class Bench:
    def __init__(self, o):
        from kazoo.client import KazooClient
        from kazoo.recipe.lock import Lock
        self.KazooClient, self.Lock = KazooClient, Lock
        self.o = o
        self.root = "/zkasio-bench-kazoo-%d" % os.getpid()
        self.path = self.root + "/lock"
        self.clients = []
        self.holders = 0
        self.holders_lock = threading.Lock()
        self.failure = None

    def client(self):
        c = self.KazooClient(hosts=self.o["hosts"], timeout=30.0)
        self.clients.append(c)
        c.start(timeout=15)
        return c

    def enter(self):
        with self.holders_lock:
            self.holders += 1
            if self.holders != 1:
                raise RuntimeError("two holders at once")

    def leave(self):
        with self.holders_lock:
            self.holders -= 1

    def run_threads(self, bodies, limit_s):
        def guarded(body):
            try:
                body()
            except BaseException as e:  # reported by the main thread
                if self.failure is None:
                    self.failure = e
        threads = [threading.Thread(target=guarded, args=(b,), daemon=True) for b in bodies]
        for t in threads:
            t.start()
        deadline = time.monotonic() + limit_s
        for t in threads:
            t.join(max(0.001, deadline - time.monotonic()))
            if t.is_alive():
                raise RuntimeError("a contender did not finish within %.0f s" % limit_s)
        if self.failure is not None:
            raise RuntimeError("a contender failed: %r" % (self.failure,))

    def handoff(self):
        rounds = self.o["rounds"]
        total = WARMUP_ROUNDS + 1 + rounds
        samples = Samples()
        state = {"n": 0, "last_release": 0, "last_holder": None}
        state_lock = threading.Lock()
        clients = [self.client(), self.client()]

        def body(me):
            lock = self.Lock(clients[me], self.path)
            while state["n"] < total and self.failure is None:
                lock.acquire()
                acquired = now()
                self.enter()
                with state_lock:
                    state["n"] += 1
                    n = state["n"]
                    if WARMUP_ROUNDS + 1 < n <= total and state["last_holder"] != me:
                        samples.add(acquired - state["last_release"])
                time.sleep(0.002)
                self.leave()
                with state_lock:
                    state["last_holder"] = me
                    state["last_release"] = now()
                lock.release()

        self.run_threads([lambda: body(0), lambda: body(1)], 600)
        return {"handoff": samples}

    def uncontended(self):
        samples = Samples()
        lock = self.Lock(self.client(), self.path)
        for i in range(WARMUP_ROUNDS + self.o["rounds"]):
            start = now()
            lock.acquire()
            lock.release()
            end = now()
            if i >= WARMUP_ROUNDS:
                samples.add(end - start)
        return {"acquire_release": samples}

    def throughput(self):
        o = self.o
        clients = [self.client() for _ in range(min(o["sessions"], o["contenders"]))]
        samples = Samples()
        counted = [0]
        last_release = [None]
        hold_ns = o["hold_us"] * 1000
        begin = now()
        window = (begin + int(WARMUP_SECONDS * 1e9), begin + int((WARMUP_SECONDS + o["seconds"]) * 1e9))

        def body(me):
            lock = self.Lock(clients[me % len(clients)], self.path)
            while self.failure is None and now() < window[1]:
                lock.acquire()
                acquired = now()
                self.enter()
                # Only the holder touches these two: the lock orders the accesses.
                previous = last_release[0]
                if window[0] <= acquired < window[1]:
                    counted[0] += 1
                    if previous is not None:
                        samples.add(acquired - previous)
                if hold_ns:
                    end = now() + hold_ns
                    while now() < end:
                        pass
                self.leave()
                last_release[0] = now()
                lock.release()

        self.run_threads([(lambda me=me: body(me)) for me in range(o["contenders"])],
                         WARMUP_SECONDS + o["seconds"] + 120)
        return {"acquisitions_per_s": counted[0] / o["seconds"], "handoff": samples}

    def cleanup(self):
        try:
            if self.clients and self.clients[0].connected and self.clients[0].exists(self.root):
                self.clients[0].delete(self.root, recursive=True)
        except Exception as e:
            print("kazoo: could not delete %s: %r" % (self.root, e), file=sys.stderr)
        for c in self.clients:
            try:
                c.stop()
                c.close()
            except Exception:
                pass


def report(o, r):
    if o["json"]:
        out = {}
        for k, v in r.items():
            out[k] = latency(v) if isinstance(v, Samples) else round(v, 1)
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        print("%-20s %10s %10s %10s %10s %8s" % ("microseconds", "p50", "p90", "p99", "max", "n"))
        for k, v in r.items():
            if isinstance(v, Samples):
                l = latency(v)
                print("%-20s %10.1f %10.1f %10.1f %10.1f %8d" % (k, l["p50"], l["p90"], l["p99"], l["max"], l["n"]))
            else:
                print("%-20s %10.1f" % (k, v))
    sys.stdout.flush()
    if o["samples"]:
        os.makedirs(o["samples"], exist_ok=True)
        for k, v in r.items():
            if isinstance(v, Samples):
                with open(os.path.join(o["samples"], k + ".txt"), "w") as f:
                    f.write("".join("%.3f\n" % (ns / 1000.0) for ns in v.values))


def main(argv):
    try:
        o = parse(argv)
    except Usage as e:
        sys.stderr.write("kazoo: %s\n%s" % (e, USAGE))
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    bench = Bench(o)
    try:
        r = getattr(bench, o["command"])()
    except Exception as e:
        print("kazoo: %s failed: %s" % (o["command"], e), file=sys.stderr)
        return 1
    finally:
        bench.cleanup()
    report(o, r)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
