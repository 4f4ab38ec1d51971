// A chaos worker on Apache Curator (Debian's 5.4), beside zkasio's workers on
// the same lock paths and under the same faults (tests/chaos/main.cpp): its
// lines are a zkasio worker's (verdict.hpp), so the verdict counts its holds
// beside theirs.
//
//   CuratorWorker INDEX HOSTS ROOT RECIPES STOP_AT LOG SEED SESSION_TIMEOUT_MS LONGEST_WAIT_MS THREADS
//
// RECIPES names the recipe of each lock ROOT/lock-I, comma-separated
// ("mutex", "semaphore:N", ...); those with a Curator counterpart are taken
// by THREADS threads in a loop until STOP_AT (CLOCK_MONOTONIC in ns, which
// is what System.nanoTime reads on Linux): InterProcessMutex,
// InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch. A holder
// ends its hold when Curator says the connection is SUSPENDED or LOST (what
// Curator's documentation asks of every lock user), logged as its lost
// signal. Then the nodes of its session that Curator lost track of, deleted
// ("leaked"), each of those locks once more (a "final" line), the nodes of
// its session left under the lock paths ("orphans"), and exit 0.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class CuratorWorker {
  // The longest hold of zkasio's long-hold lock: the final tries wait for it.
  static final long LONGEST_HOLD_MS = 12000;

  final int index;
  final String root, log;
  final String[] recipes;
  final long stopAt, seed, sessionTimeoutMs, longestWaitMs;
  final CuratorFramework client;
  // Counts the connection's suspensions and losses: a hold taken before a
  // change of it may be lost.
  long lostEpoch = 0;

  // One grant: its fencing token (its node's czxid; 0 where the recipe's
  // holders share the lock, or when not known); release() gives it back.
  interface Held {
    long token() throws Exception;
    void release() throws Exception;
  }

  // One Curator recipe object on one lock, of one thread.
  interface Contender {
    // The hold, or null if the deadline (ms from now) passed first.
    Held acquire(long waitMs) throws Exception;
  }

  CuratorWorker(String[] args) {
    index = Integer.parseInt(args[0]);
    root = args[2];
    recipes = args[3].split(",");
    stopAt = Long.parseLong(args[4]);
    log = args[5];
    seed = Long.parseLong(args[6]);
    sessionTimeoutMs = Long.parseLong(args[7]);
    longestWaitMs = Long.parseLong(args[8]);
    client = CuratorFrameworkFactory.newClient(args[1], (int) sessionTimeoutMs, (int) sessionTimeoutMs,
                                               new ExponentialBackoffRetry(100, 5));
    client.getConnectionStateListenable().addListener((c, state) -> {
      if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
        synchronized (this) {
          ++lostEpoch;
          notifyAll();
        }
      }
    });
  }

  String path(int lock) { return root + "/lock-" + lock; }
  String kind(int lock) { return recipes[lock].split(":")[0]; }
  int capacity(int lock) {
    String[] parts = recipes[lock].split(":");
    return parts.length > 1 ? Integer.parseInt(parts[1]) : 1;
  }
  // The recipes Curator has a counterpart of, on the same nodes.
  boolean curatorHas(int lock) {
    String k = kind(lock);
    return k.equals("mutex") || k.equals("handoff_mutex") || k.equals("shared_mutex") || k.equals("semaphore")
        || k.equals("election_fair");
  }

  // The czxid of `node` if this session owns it; else 0 (not known: after
  // a fault the node looked up may be gone, or another's).
  long czxid(String node) throws Exception {
    Stat st = client.checkExists().forPath(node);
    long session = client.getZookeeperClient().getZooKeeper().getSessionId();
    return st == null || st.getEphemeralOwner() != session ? 0 : st.getCzxid();
  }

  // A contender of `lock`'s recipe: `reader` picks a read/write lock's side,
  // `leases` a semaphore's count.
  Contender contender(int lock, boolean reader, int leases) {
    String p = path(lock);
    switch (kind(lock)) {
      case "shared_mutex": {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, p);
        InterProcessMutex side = reader ? rw.readLock() : rw.writeLock();
        return waitMs -> side.acquire(waitMs, TimeUnit.MILLISECONDS) ? held(0, side::release) : null;
      }
      case "semaphore": {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, p, capacity(lock));
        return waitMs -> {
          Collection<Lease> got = semaphore.acquire(leases, waitMs, TimeUnit.MILLISECONDS);
          return got == null ? null : held(0, () -> semaphore.returnAll(got));
        };
      }
      case "election_fair":
        return waitMs -> {
          LeaderLatch latch = new LeaderLatch(client, p, "curator-" + index);
          latch.start();
          if (!latch.await(waitMs, TimeUnit.MILLISECONDS)) {
            latch.close();
            return null;
          }
          return heldOr(() -> czxid(latch.getOurPath()), latch::close);
        };
      default: {
        InterProcessMutex mutex = new InterProcessMutex(client, p);
        return waitMs -> {
          if (!mutex.acquire(waitMs, TimeUnit.MILLISECONDS)) return null;
          // The holder's node is the first of the queue: its own, if its
          // session's (else the token is not known: 0).
          return heldOr(() -> {
            String first = mutex.getParticipantNodes().iterator().next();
            return czxid(p + "/" + first.substring(first.lastIndexOf('/') + 1));
          }, mutex::release);
        };
      }
    }
  }

  interface Release {
    void run() throws Exception;
  }

  interface Token {
    long read() throws Exception;
  }

  // A grant whose token is read from the server: if the read fails (the
  // connection cut under it), the grant is released before the failure goes
  // on, or the lock would stay held by a thread that has moved on, every
  // waiter without a deadline behind it for as long as the session lives.
  static Held heldOr(Token token, Release release) throws Exception {
    try {
      return held(token.read(), release);
    } catch (Exception e) {
      try {
        release.run();
      } catch (Exception releasing) {
        e.addSuppressed(releasing);
      }
      throw e;
    }
  }

  static Held held(long token, Release release) {
    return new Held() {
      public long token() { return token; }
      public void release() throws Exception { release.run(); }
    };
  }

  synchronized void append(String line) throws Exception {
    Files.write(Paths.get(log), (line + "\n").getBytes(StandardCharsets.UTF_8), StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
  }

  // Until the hold's time is up or the connection was suspended or lost
  // (true: lost).
  synchronized boolean holdFor(long nanos, long epoch) throws InterruptedException {
    long until = System.nanoTime() + nanos;
    while (lostEpoch == epoch) {
      long left = until - System.nanoTime();
      if (left <= 0) return false;
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }

  synchronized long epoch() { return lostEpoch; }

  static String resultOf(Exception e) { return "curator_" + e.getClass().getSimpleName(); }

  void contend(int thread, List<Integer> locks) throws Exception {
    Random random = new Random(seed * 1000 + thread);
    while (System.nanoTime() < stopAt) {
      int lock = locks.get(random.nextInt(locks.size()));
      boolean reader = random.nextBoolean();
      int leases = 1 + random.nextInt(capacity(lock));
      long waitMs = 500 + (long) (random.nextDouble() * (longestWaitMs - 500));
      long start = System.nanoTime(), deadline = start + waitMs * 1_000_000;
      long epoch = epoch();
      Held h = null;
      String result;
      try {
        h = contender(lock, reader, leases).acquire(waitMs);
        result = h == null ? "timeout" : "ok";
      } catch (Exception e) {
        result = resultOf(e);
      }
      long granted = System.nanoTime();
      append("acquire " + index + " " + lock + " " + start + " " + granted + " " + deadline + " " + result);
      if (h == null) continue;
      long token = 0;
      try {
        token = h.token();
      } catch (Exception e) {
        // (The token is looked up after the grant; a fault may take it.)
      }
      boolean lost = epoch() != epoch || holdFor((long) (random.nextDouble() * 5_000_000), epoch);
      long end = System.nanoTime();
      append("hold " + index + " " + lock + " " + granted + " " + end + " " + token + " 0 " + (lost ? 1 : 0) + " "
             + kind(lock) + " " + (reader && kind(lock).equals("shared_mutex") ? "read" : "write") + " "
             + (kind(lock).equals("semaphore") ? leases : 1) + " " + capacity(lock) + " " + start);
      try {
        h.release();
      } catch (Exception e) {
        // Lost: its node went with the session, or goes with it.
      }
    }
  }

  // The nodes of this session under `node`, two levels down (a semaphore's
  // leases and its mutex's nodes are a level below its path); deleted too
  // if `remove`.
  int mine(String node, int depth, boolean remove) throws Exception {
    List<String> kids;
    try {
      kids = client.getChildren().forPath(node);
    } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
      return 0;
    }
    long session = client.getZookeeperClient().getZooKeeper().getSessionId();
    int n = 0;
    for (String kid : kids) {
      Stat st = client.checkExists().forPath(node + "/" + kid);
      if (st != null && st.getEphemeralOwner() == session) {
        ++n;
        if (remove) {
          try {
            client.delete().forPath(node + "/" + kid);
          } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
            // (gone meanwhile)
          }
        }
      }
      if (depth > 1) n += mine(node + "/" + kid, depth - 1, remove);
    }
    return n;
  }

  // This session's nodes under every lock path, deleted; how many. (Retried
  // while the connection is down: at most 20 s.)
  int leakedNodesRemoved() throws Exception {
    for (long until = System.nanoTime() + 20_000_000_000L;;) {
      try {
        int n = 0;
        for (int i = 0; i < recipes.length; ++i) n += mine(path(i), 2, true);
        return n;
      } catch (org.apache.zookeeper.KeeperException e) {
        if (System.nanoTime() > until) throw e;
        Thread.sleep(100);
      }
    }
  }

  void run(int threads) throws Exception {
    client.start();
    List<Integer> locks = new ArrayList<>();
    for (int i = 0; i < recipes.length; ++i)
      if (curatorHas(i)) locks.add(i);
    List<Thread> running = new ArrayList<>();
    List<Exception> failures = new ArrayList<>();
    for (int t = 0; t < threads && !locks.isEmpty(); ++t) {
      int thread = t;
      Thread worker = new Thread(() -> {
        try {
          contend(thread, locks);
        } catch (Exception e) {
          synchronized (failures) {
            failures.add(e);
          }
        }
      });
      worker.start();
      running.add(worker);
    }
    for (Thread t : running) t.join();
    if (!failures.isEmpty()) throw failures.get(0);
    // Every thread has ended: a node of this session still there is one
    // Curator lost track of (a LeaderLatch's or a mutex's after a
    // reconnection: CURATOR-498, CURATOR-315 are such bugs). It would stand
    // at the head of its queue for as long as the session lives, every
    // waiter without a deadline behind it, zkasio's too: counted
    // ("leaked", beside Curator) and deleted, so that the run can end.
    append("leaked " + index + " " + leakedNodesRemoved());
    // After the faults, each lock once more: a free lock must be granted.
    long finalDeadline = stopAt + (longestWaitMs + LONGEST_HOLD_MS + 2 * sessionTimeoutMs + 5000) * 1_000_000;
    for (int lock : locks) {
      Held h = null;
      try {
        h = contender(lock, false, 1).acquire(Math.max(0, (finalDeadline - System.nanoTime()) / 1_000_000));
      } catch (Exception e) {
        // refused
      }
      append("final " + index + " " + lock + " " + (h != null ? "granted" : "refused"));
      if (h != null) h.release();
    }
    int left = -1;
    for (long until = System.nanoTime() + 20_000_000_000L; left != 0 && System.nanoTime() < until;) {
      left = 0;
      for (int i = 0; i < recipes.length; ++i) left += mine(path(i), 2, false);
      if (left != 0) Thread.sleep(100);
    }
    append("orphans " + index + " " + left);
    client.close();
  }

  public static void main(String[] args) throws Exception {
    new CuratorWorker(args).run(Integer.parseInt(args[9]));
    System.exit(0);
  }
}
