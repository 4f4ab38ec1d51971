// A Curator contender for the interoperability tests, the counterpart of
// examples/lock_order with the same command line:
//
//   CuratorContender HOSTS PATH NAME ROUNDS LOG [mutex|read|write|lease-N|leader]
//
// Takes an InterProcessMutex (no MODE, or "mutex": its lines then say so), an InterProcessReadWriteLock's read
// or write lock, one lease of an InterProcessSemaphoreV2 of N, or a
// LeaderLatch's leadership, ROUNDS times, appending "enter NAME" and "exit
// NAME" ("enter MODE NAME", "enter lease NAME") to LOG while holding it (one
// write each, O_APPEND), so that overlapping holders show.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorContender {
  // Takes the hold; the returned action gives it back.
  interface Hold {
    AutoCloseable take() throws Exception;
  }

  public static void main(String[] args) throws Exception {
    String hosts = args[0], path = args[1], name = args[2], log = args[4];
    String mode = args.length > 5 ? args[5] : "";
    int rounds = Integer.parseInt(args[3]);
    boolean lease = mode.startsWith("lease-");
    String who = mode.isEmpty() ? name : (lease ? "lease" : mode) + " " + name;
    try (CuratorFramework client =
             CuratorFrameworkFactory.newClient(hosts, 10000, 5000, new RetryNTimes(3, 100))) {
      client.start();
      Hold hold;
      if (lease) {
        InterProcessSemaphoreV2 semaphore =
            new InterProcessSemaphoreV2(client, path, Integer.parseInt(mode.substring(6)));
        hold = () -> {
          Lease l = semaphore.acquire();
          return () -> semaphore.returnLease(l);
        };
      } else if (mode.equals("leader")) {
        hold = () -> {
          LeaderLatch latch = new LeaderLatch(client, path, name);
          latch.start();
          latch.await();
          return latch::close;
        };
      } else {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        InterProcessMutex mutex =
            mode.isEmpty() || mode.equals("mutex") ? new InterProcessMutex(client, path)
            : mode.equals("read") ? rw.readLock() : rw.writeLock();
        hold = () -> {
          mutex.acquire();
          return mutex::release;
        };
      }
      for (int i = 0; i < rounds; ++i) {
        try (AutoCloseable held = hold.take()) {
          append(log, "enter " + who + "\n");
          // Shared holds long enough for holders of both kinds to overlap.
          Thread.sleep(lease || mode.equals("read") ? 20 : 5);
          append(log, "exit " + who + "\n");
        }
      }
    }
  }

  private static void append(String log, String line) throws Exception {
    Files.write(Paths.get(log), line.getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }
}
