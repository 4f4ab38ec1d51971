// The Apache Curator peer of zkasio-bench: InterProcessMutex (and the
// read/write lock and the semaphore) measured with the same protocol, the same
// command line and the same JSON as zkasio's.
//
//   CuratorBench SUBCOMMAND --hosts H [--rounds N] [--contenders C] [--sessions S]
//                [--seconds D] [--hold-us H] [--recipe R] [--samples DIR] [--json]
//
//   handoff      two sessions ping-pong one lock; the holder sleeps 2 ms (so the
//                other is surely queued), stamps t_release and releases; the
//                other stamps t_acquired when acquire() returns. Key "handoff".
//                --recipe: mutex (InterProcessMutex), rw (InterProcessReadWriteLock's
//                write lock) or semaphore (one lease of InterProcessSemaphoreV2 of 1).
//   read-heavy   C threads over S clients loop on one InterProcessReadWriteLock,
//                every 11th on the write lock (10 readers : 1 writer), the others
//                on the read lock, holding H microseconds. Keys "reads_per_s",
//                "writes_per_s", "acquisitions_per_s".
//   uncontended  one acquire plus one release, nobody else contending. Key
//                "acquire_release".
//   throughput   C threads over S clients (round-robin) loop on one lock:
//                acquire, hold H microseconds (a busy-wait on System.nanoTime,
//                precise for short holds), stamp t_release, release. Keys
//                "acquisitions_per_s" and "handoff" (t_acquired minus the
//                previous holder's t_release, the first acquisition skipped).
//
// JIT warm-up before measuring: max(200, N) untimed rounds for handoff and
// uncontended, 2 s untimed at the same settings for throughput. Latencies are
// in microseconds, percentiles by nearest rank. With --samples DIR each
// latency's raw samples also go to DIR/<key>.txt, one per line. Every lock
// node lives under /zkasio-bench-curator-<pid>, deleted at the end. Exit
// status: 0 done, 1 failure (including two holders seen at once), 2 bad
// arguments.
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBench {
  static final String USAGE =
      "usage: curator SUBCOMMAND --hosts H [--rounds N] [--contenders C] [--sessions S]\n"
      + "               [--seconds D] [--hold-us H] [--samples DIR] [--json]\n"
      + "subcommands: handoff [--recipe mutex|rw|semaphore], uncontended, throughput, read-heavy\n"
      + "--hosts defaults to $ZKASIO_HOSTS, then 127.0.0.1:2181; latencies are in microseconds.\n";

  static final class Usage extends Exception {
    Usage(String message) { super(message); }
  }

  static String command;
  static String hosts;
  static int rounds = 200, contenders = 4, sessions = 1, holdUs = 0;
  static double seconds = 3;
  static String recipe = "mutex";
  static String samplesDir;
  static boolean json;
  static final String root = "/zkasio-bench-curator-" + ProcessHandle.current().pid();
  static final String lockPath = root + "/lock";

  // Latency samples in nanoseconds, appended by one thread at a time.
  static final class Samples {
    long[] values = new long[1024];
    int size;
    synchronized void add(long ns) {
      if (size == values.length) values = Arrays.copyOf(values, size * 2);
      values[size++] = ns;
    }
    synchronized long[] sorted() {
      long[] s = Arrays.copyOf(values, size);
      Arrays.sort(s);
      return s;
    }
  }

  static String micros(long ns) { return String.format(Locale.ROOT, "%.1f", ns / 1000.0); }

  static String percentile(long[] sorted, double p) {
    if (sorted.length == 0) return "0.0";
    int rank = (int) Math.ceil(p / 100 * sorted.length);
    rank = Math.max(1, Math.min(rank, sorted.length));
    return micros(sorted[rank - 1]);
  }

  static String latencyJson(Samples s) {
    long[] v = s.sorted();
    return "{\"p50\": " + percentile(v, 50) + ", \"p90\": " + percentile(v, 90)
        + ", \"p99\": " + percentile(v, 99) + ", \"max\": " + percentile(v, 100)
        + ", \"n\": " + v.length + "}";
  }

  static void writeSamples(String key, Samples s) throws IOException {
    if (samplesDir == null) return;
    long[] v;
    synchronized (s) { v = Arrays.copyOf(s.values, s.size); }
    StringBuilder out = new StringBuilder(v.length * 10);
    for (long ns : v) out.append(String.format(Locale.ROOT, "%.3f", ns / 1000.0)).append('\n');
    Path dir = Paths.get(samplesDir);
    Files.createDirectories(dir);
    Files.write(dir.resolve(key + ".txt"), out.toString().getBytes(StandardCharsets.UTF_8));
  }

  static CuratorFramework newClient() {
    CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, 30000, 15000, new RetryNTimes(3, 100));
    c.start();
    return c;
  }

  static int parseInt(String option, String text, int min, int max) throws Usage {
    try {
      int n = Integer.parseInt(text);
      if (n >= min && n <= max) return n;
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new Usage(option + " must be a number from " + min + " to " + max + ", not '" + text + "'");
  }

  static void parse(String[] args) throws Usage {
    if (args.length < 1) throw new Usage("missing SUBCOMMAND");
    command = args[0];
    if (!List.of("handoff", "uncontended", "throughput", "read-heavy").contains(command))
      throw new Usage("unknown subcommand '" + command + "'");
    String env = System.getenv("ZKASIO_HOSTS");
    hosts = env != null && !env.isEmpty() ? env : "127.0.0.1:2181";
    for (int i = 1; i < args.length; ++i) {
      String arg = args[i];
      if (arg.equals("--json")) {
        json = true;
        continue;
      }
      if (!List.of("--hosts", "--rounds", "--contenders", "--sessions", "--seconds", "--hold-us", "--samples",
                   "--recipe")
               .contains(arg))
        throw new Usage("unknown option '" + arg + "'");
      if (i + 1 >= args.length) throw new Usage(arg + " needs a value");
      String value = args[++i];
      switch (arg) {
        case "--hosts":
          if (value.isEmpty()) throw new Usage("--hosts must not be empty");
          hosts = value;
          break;
        case "--rounds": rounds = parseInt(arg, value, 1, 10_000_000); break;
        case "--recipe":
          if (!List.of("mutex", "rw", "semaphore").contains(value))
            throw new Usage("--recipe must be mutex, rw or semaphore, not '" + value + "'");
          recipe = value;
          break;
        case "--contenders": contenders = parseInt(arg, value, 1, 10_000); break;
        case "--sessions": sessions = parseInt(arg, value, 1, 1_000); break;
        case "--hold-us": holdUs = parseInt(arg, value, 0, 10_000_000); break;
        case "--samples":
          if (value.isEmpty()) throw new Usage("--samples must not be empty");
          samplesDir = value;
          break;
        case "--seconds":
          try {
            seconds = Double.parseDouble(value);
          } catch (NumberFormatException e) {
            seconds = Double.NaN;
          }
          if (!(seconds > 0 && seconds <= 86400))
            throw new Usage("--seconds must be a positive number of seconds, not '" + value + "'");
          break;
        default: throw new Usage("unknown option '" + arg + "'");
      }
    }
  }

  // Runs the threads, failing if one throws or all do not end within the limit.
  static void runAll(List<Thread> threads, AtomicReference<Throwable> failure, long limitMs)
      throws Exception {
    for (Thread t : threads) {
      t.setUncaughtExceptionHandler((th, e) -> failure.compareAndSet(null, e));
      t.start();
    }
    long deadline = System.currentTimeMillis() + limitMs;
    for (Thread t : threads) {
      t.join(Math.max(1, deadline - System.currentTimeMillis()));
      if (t.isAlive()) throw new IllegalStateException("a contender did not finish within " + limitMs + " ms");
    }
    if (failure.get() != null) throw new IllegalStateException("a contender failed", failure.get());
  }

  static void spinMicros(long us) {
    if (us <= 0) return;
    long end = System.nanoTime() + us * 1000;
    while (System.nanoTime() < end) Thread.onSpinWait();
  }

  // A thread that runs `body`, a failure ending it (runAll reports it).
  interface Body { void run() throws Exception; }
  static Thread thread(String name, Body body) {
    return new Thread(() -> {
      try {
        body.run();
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    }, name);
  }

  // A held lock of any recipe, and how to take one.
  interface Held { void release() throws Exception; }
  interface Lockable { Held acquire() throws Exception; }

  static Lockable lockFor(CuratorFramework client) {
    switch (recipe) {
      case "rw": {
        InterProcessMutex write = new InterProcessReadWriteLock(client, lockPath).writeLock();
        return () -> { write.acquire(); return write::release; };
      }
      case "semaphore": {
        InterProcessSemaphoreV2 leases = new InterProcessSemaphoreV2(client, lockPath, 1);
        return () -> { Lease lease = leases.acquire(); return () -> leases.returnLease(lease); };
      }
      default: {
        InterProcessMutex mutex = new InterProcessMutex(client, lockPath);
        return () -> { mutex.acquire(); return mutex::release; };
      }
    }
  }

  // handoff: two sessions, two threads, strict alternation.
  static Map<String, Object> handoff() throws Exception {
    int warmup = Math.max(200, rounds);
    long total = warmup + 1L + rounds;  // acquisitions: warm-up, the first, then N measured handoffs
    Samples samples = new Samples();
    AtomicLong acquisitions = new AtomicLong();
    AtomicInteger holders = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    long[] lastRelease = {0};
    int[] lastHolder = {-1};
    Object stamp = new Object();
    CuratorFramework[] clients = {newClient(), newClient()};
    try {
      for (CuratorFramework c : clients) c.blockUntilConnected(15, TimeUnit.SECONDS);
      List<Thread> threads = new ArrayList<>();
      for (int id = 0; id < 2; ++id) {
        final int me = id;
        final Lockable lock = lockFor(clients[id]);
        threads.add(new Thread(() -> {
          try {
            while (acquisitions.get() < total && failure.get() == null) {
              Held held = lock.acquire();
              long acquired = System.nanoTime();
              if (holders.incrementAndGet() != 1) throw new IllegalStateException("two holders at once");
              long n = acquisitions.incrementAndGet();
              synchronized (stamp) {
                if (n > warmup + 1 && n <= total && lastHolder[0] != me) samples.add(acquired - lastRelease[0]);
              }
              Thread.sleep(2);
              holders.decrementAndGet();
              synchronized (stamp) {
                lastHolder[0] = me;
                lastRelease[0] = System.nanoTime();
              }
              held.release();
            }
          } catch (Exception e) {
            throw new RuntimeException(e);
          }
        }, "handoff-" + id));
      }
      runAll(threads, failure, 600_000);
    } finally {
      cleanup(clients);
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("handoff", samples);
    return r;
  }

  // uncontended: one session, one thread.
  static Map<String, Object> uncontended() throws Exception {
    Samples samples = new Samples();
    CuratorFramework[] clients = {newClient()};
    try {
      clients[0].blockUntilConnected(15, TimeUnit.SECONDS);
      InterProcessMutex mutex = new InterProcessMutex(clients[0], lockPath);
      int warmup = Math.max(200, rounds);
      for (int i = 0; i < warmup + rounds; ++i) {
        long start = System.nanoTime();
        mutex.acquire();
        mutex.release();
        long end = System.nanoTime();
        if (i >= warmup) samples.add(end - start);
      }
    } finally {
      cleanup(clients);
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("acquire_release", samples);
    return r;
  }

  // throughput: C threads over S sessions on one lock; 2 s warm-up, then D s measured.
  static Map<String, Object> throughput() throws Exception {
    final long warmupNs = 2_000_000_000L;
    final long measureNs = (long) (seconds * 1e9);
    Samples samples = new Samples();
    AtomicLong counted = new AtomicLong();
    AtomicInteger holders = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    // The last holder's t_release, read by the next holder: an atomic, as the
    // order the lock gives (through ZooKeeper) is invisible to the JVM.
    final AtomicLong lastReleaseStamp = new AtomicLong(Long.MIN_VALUE);
    CuratorFramework[] clients = new CuratorFramework[Math.min(sessions, contenders)];
    for (int i = 0; i < clients.length; ++i) clients[i] = newClient();
    long[] window = new long[2];
    try {
      for (CuratorFramework c : clients) c.blockUntilConnected(15, TimeUnit.SECONDS);
      long begin = System.nanoTime();
      window[0] = begin + warmupNs;
      window[1] = window[0] + measureNs;
      List<Thread> threads = new ArrayList<>();
      for (int id = 0; id < contenders; ++id) {
        final InterProcessMutex mutex = new InterProcessMutex(clients[id % clients.length], lockPath);
        threads.add(thread("contender-" + id, () -> {
          while (failure.get() == null) {
            if (System.nanoTime() >= window[1]) break;
            mutex.acquire();
            long acquired = System.nanoTime();
            if (holders.incrementAndGet() != 1) throw new IllegalStateException("two holders at once");
            long previous = lastReleaseStamp.get();
            if (acquired >= window[0] && acquired < window[1]) {
              counted.incrementAndGet();
              if (previous != Long.MIN_VALUE) samples.add(acquired - previous);
            }
            spinMicros(holdUs);
            holders.decrementAndGet();
            lastReleaseStamp.set(System.nanoTime());
            mutex.release();
          }
        }));
      }
      runAll(threads, failure, (long) ((warmupNs + measureNs) / 1e6) + 120_000);
    } finally {
      cleanup(clients);
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("acquisitions_per_s", counted.get() / (measureNs / 1e9));
    r.put("handoff", samples);
    return r;
  }

  // read-heavy: C threads over S sessions on one read/write lock, every 11th a
  // writer; 2 s warm-up, then D s measured.
  static Map<String, Object> readHeavy() throws Exception {
    final long warmupNs = 2_000_000_000L;
    final long measureNs = (long) (seconds * 1e9);
    AtomicLong reads = new AtomicLong(), writes = new AtomicLong();
    AtomicInteger readers = new AtomicInteger(), writers = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CuratorFramework[] clients = new CuratorFramework[Math.min(sessions, contenders)];
    for (int i = 0; i < clients.length; ++i) clients[i] = newClient();
    long[] window = new long[2];
    try {
      for (CuratorFramework c : clients) c.blockUntilConnected(15, TimeUnit.SECONDS);
      window[0] = System.nanoTime() + warmupNs;
      window[1] = window[0] + measureNs;
      List<Thread> threads = new ArrayList<>();
      for (int id = 0; id < contenders; ++id) {
        final boolean write = id % 11 == 10;
        final InterProcessReadWriteLock lock = new InterProcessReadWriteLock(clients[id % clients.length], lockPath);
        final InterProcessMutex mutex = write ? lock.writeLock() : lock.readLock();
        threads.add(thread("contender-" + id, () -> {
          while (failure.get() == null) {
            if (System.nanoTime() >= window[1]) break;
            mutex.acquire();
            long acquired = System.nanoTime();
            if (writers.get() > 0 || (write && readers.get() > 0))
              throw new IllegalStateException("a writer held beside another holder");
            (write ? writers : readers).incrementAndGet();
            if (acquired >= window[0] && acquired < window[1]) (write ? writes : reads).incrementAndGet();
            spinMicros(holdUs);
            (write ? writers : readers).decrementAndGet();
            mutex.release();
          }
        }));
      }
      runAll(threads, failure, (long) ((warmupNs + measureNs) / 1e6) + 120_000);
    } finally {
      cleanup(clients);
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("reads_per_s", reads.get() / (measureNs / 1e9));
    r.put("writes_per_s", writes.get() / (measureNs / 1e9));
    r.put("acquisitions_per_s", (reads.get() + writes.get()) / (measureNs / 1e9));
    return r;
  }

  // Deletes what this run created, then closes the clients.
  static void cleanup(CuratorFramework[] clients) {
    try {
      for (CuratorFramework c : clients) {
        if (c == null) continue;
        if (c.checkExists().forPath(root) != null) c.delete().deletingChildrenIfNeeded().forPath(root);
        break;
      }
    } catch (Exception e) {
      System.err.println("curator: could not delete " + root + ": " + e);
    } finally {
      for (CuratorFramework c : clients) if (c != null) c.close();
    }
  }

  static void report(Map<String, Object> r) throws IOException {
    PrintStream out = System.out;
    StringBuilder s = new StringBuilder();
    if (json) {
      s.append('{');
      boolean first = true;
      for (Map.Entry<String, Object> e : r.entrySet()) {
        if (!first) s.append(", ");
        first = false;
        s.append('"').append(e.getKey()).append("\": ");
        Object v = e.getValue();
        if (v instanceof Samples) s.append(latencyJson((Samples) v));
        else s.append(String.format(Locale.ROOT, "%.1f", (Double) v));
      }
      s.append('}');
      out.println(s);
    } else {
      out.printf(Locale.ROOT, "%-20s %10s %10s %10s %10s %8s%n", "microseconds", "p50", "p90", "p99", "max", "n");
      for (Map.Entry<String, Object> e : r.entrySet()) {
        Object v = e.getValue();
        if (v instanceof Samples) {
          long[] x = ((Samples) v).sorted();
          out.printf(Locale.ROOT, "%-20s %10s %10s %10s %10s %8d%n", e.getKey(), percentile(x, 50),
                     percentile(x, 90), percentile(x, 99), percentile(x, 100), x.length);
        } else {
          out.printf(Locale.ROOT, "%-20s %10.1f%n", e.getKey(), (Double) v);
        }
      }
    }
    out.flush();
    for (Map.Entry<String, Object> e : r.entrySet())
      if (e.getValue() instanceof Samples) writeSamples(e.getKey(), (Samples) e.getValue());
  }

  public static void main(String[] args) {
    try {
      parse(args);
    } catch (Usage e) {
      System.err.print("curator: " + e.getMessage() + "\n" + USAGE);
      System.exit(2);
    }
    int status = 0;
    try {
      Map<String, Object> r;
      switch (command) {
        case "handoff": r = handoff(); break;
        case "uncontended": r = uncontended(); break;
        case "read-heavy": r = readHeavy(); break;
        default: r = throughput(); break;
      }
      report(r);
    } catch (Throwable e) {
      System.err.println("curator: " + command + " failed: " + e);
      Throwable cause = e.getCause();
      while (cause != null) {
        System.err.println("  caused by: " + cause);
        cause = cause.getCause();
      }
      status = 1;
    }
    System.out.flush();
    // Curator's and ZooKeeper's threads must not keep the JVM alive.
    System.exit(status);
  }
}
